// The paged key/value pool and its reference-counted block allocator.
#include "policy/kv_cache.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/error.h"

namespace crl::policy {

int64_t PagedKvCache::bytes_per_block(const ModelConfig& config, int64_t block_size, torch::ScalarType dtype) {
  return 2 * config.num_hidden_layers * block_size * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype));
}

PagedKvCache PagedKvCache::allocate(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
                                    torch::ScalarType dtype, torch::Device device) {
  if (block_size <= 0 || block_size > 4096) {
    throw InputError(fmt::format("KV cache: block size {} must be in [1, 4096]", block_size));
  }
  if (num_blocks < 2 || num_blocks > (int64_t{1} << 31) / block_size) {
    throw InputError(fmt::format("KV cache: {} blocks of {} slots: need at least 2 (one is scratch) and fewer than 2^31 slots",
                                 num_blocks, block_size));
  }
  PagedKvCache cache;
  cache.block_size = block_size;
  cache.num_blocks = num_blocks;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    // Zero-filled: slots never written hold finite values, which masks then hide (0 * NaN would not vanish).
    cache.keys.push_back(torch::zeros({num_blocks * block_size, config.num_key_value_heads, config.head_dim}, options));
    cache.values.push_back(torch::zeros({num_blocks * block_size, config.num_key_value_heads, config.head_dim}, options));
  }
  return cache;
}

void PagedKvCache::copy_block(int64_t from, int64_t to) {
  for (size_t layer = 0; layer < keys.size(); ++layer) {
    keys[layer].narrow(0, to * block_size, block_size).copy_(keys[layer].narrow(0, from * block_size, block_size));
    values[layer].narrow(0, to * block_size, block_size).copy_(values[layer].narrow(0, from * block_size, block_size));
  }
}

int64_t PagedKvCache::bytes() const {
  int64_t total = 0;
  for (const auto& t : keys) total += t.numel() * t.element_size();
  for (const auto& t : values) total += t.numel() * t.element_size();
  return total;
}

BlockAllocator::BlockAllocator(int64_t num_blocks) : refcount_(static_cast<size_t>(num_blocks), 0) {
  // Handed out from the back: low block numbers first.
  for (int64_t b = num_blocks - 1; b >= 1; --b) free_.push_back(b);
}

int64_t BlockAllocator::allocate() {
  if (free_.empty()) throw Error("KV cache: no free block (the scheduler's reservation should have prevented this)");
  const int64_t block = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(block)] = 1;
  return block;
}

void BlockAllocator::retain(int64_t block) {
  if (refcount_.at(static_cast<size_t>(block)) <= 0) throw Error(fmt::format("KV cache: block {} retained while free", block));
  ++refcount_[static_cast<size_t>(block)];
}

void BlockAllocator::release(int64_t block) {
  int64_t& count = refcount_.at(static_cast<size_t>(block));
  if (count <= 0) throw Error(fmt::format("KV cache: block {} released while free", block));
  if (--count == 0) free_.push_back(block);
}

void BlockAllocator::reserve(int64_t blocks) {
  if (blocks < 0 || blocks > available()) {
    throw Error(fmt::format("KV cache: reserving {} blocks with {} available", blocks, available()));
  }
  reserved_ += blocks;
}

void BlockAllocator::unreserve(int64_t blocks) {
  if (blocks < 0 || blocks > reserved_) throw Error(fmt::format("KV cache: unreserving {} of {} reserved blocks", blocks, reserved_));
  reserved_ -= blocks;
}

}  // namespace crl::policy
