// The paged key/value cache of generation: fixed-size blocks of token slots in one preallocated
// pool per layer, handed out to sequences by a reference-counted allocator, so memory follows the
// tokens actually held (not the longest sequence) and the samples of one prompt share its blocks.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "policy/config.h"

namespace crl::policy {

// Per layer, keys and values of shape [num_blocks * block_size, kv_heads, head_dim]: block b holds
// slots [b * block_size, (b + 1) * block_size). A sequence's block table lists its blocks in token
// order, so token t of the sequence lives in slot table[t / block_size] * block_size + t % block_size.
// Block 0 is a scratch block that the allocator never hands out: padding rows of a fixed-shape
// decode step write and read there.
struct PagedKvCache {
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  std::vector<torch::Tensor> keys;
  std::vector<torch::Tensor> values;

  // Bytes one block takes over all layers (keys and values).
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size, torch::ScalarType dtype);
  // The pool for `num_blocks` blocks (the scratch block included). InputError when a size is out of range.
  static PagedKvCache allocate(const ModelConfig& config, int64_t num_blocks, int64_t block_size, torch::ScalarType dtype,
                               torch::Device device);
  // Copies the slots of block `from` into block `to`, in every layer (copy-on-write of a shared block).
  void copy_block(int64_t from, int64_t to);
  int64_t bytes() const;
};

// Hands out the blocks of a PagedKvCache. A block returns to the free list when its last holder
// releases it. Reservations let a scheduler promise a sequence the blocks it may still need, so a
// running sequence never finds the pool empty (admission checks `available()`).
class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);  // blocks 1 .. num_blocks-1 (0 is scratch)

  int64_t allocate();           // one free block, reference count 1; Error when none is free
  void retain(int64_t block);   // one more holder
  void release(int64_t block);  // one holder fewer; freed at zero
  int64_t references(int64_t block) const { return refcount_.at(static_cast<size_t>(block)); }

  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Free blocks that no reservation has claimed.
  int64_t available() const { return free_blocks() - reserved_; }
  void reserve(int64_t blocks);    // claims `blocks` of the available ones (Error if fewer)
  void unreserve(int64_t blocks);  // gives back a claim (the holder allocated or no longer needs them)
  int64_t reserved() const { return reserved_; }

 private:
  std::vector<int64_t> free_;
  std::vector<int64_t> refcount_;
  int64_t reserved_ = 0;
};

}  // namespace crl::policy
