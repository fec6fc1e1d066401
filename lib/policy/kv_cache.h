// A static key/value cache for batched decoding: preallocated once for the longest sequence, so the
// decode step has fixed shapes (the condition for replaying it as a CUDA graph).
#pragma once

#include <torch/types.h>

#include <vector>

#include "policy/config.h"

namespace crl::policy {

// Per layer, keys and values of shape [batch, kv_heads, capacity, head_dim]. Slot t of every
// sequence holds the token at column t of the (left-padded) batch; which slots a query may see is
// the attention mask's business, not the cache's.
struct KvCache {
  std::vector<torch::Tensor> keys;
  std::vector<torch::Tensor> values;

  static KvCache allocate(const ModelConfig& config, int64_t batch, int64_t capacity, torch::ScalarType dtype,
                          torch::Device device);
  int64_t batch() const { return keys.empty() ? 0 : keys[0].size(0); }
  int64_t capacity() const { return keys.empty() ? 0 : keys[0].size(2); }
  int64_t bytes() const;
};

}  // namespace crl::policy
