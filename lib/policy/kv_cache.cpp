// Allocation of the static key/value cache.
#include "policy/kv_cache.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/error.h"

namespace crl::policy {

KvCache KvCache::allocate(const ModelConfig& config, int64_t batch, int64_t capacity, torch::ScalarType dtype,
                          torch::Device device) {
  if (batch <= 0 || capacity <= 0) {
    throw InputError(fmt::format("KV cache: batch {} and capacity {} must be positive", batch, capacity));
  }
  KvCache cache;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    // Zero-filled, so slots never written (left padding) hold finite values that masks then hide.
    cache.keys.push_back(torch::zeros({batch, config.num_key_value_heads, capacity, config.head_dim}, options));
    cache.values.push_back(torch::zeros({batch, config.num_key_value_heads, capacity, config.head_dim}, options));
  }
  return cache;
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const auto& t : keys) total += t.numel() * t.element_size();
  for (const auto& t : values) total += t.numel() * t.element_size();
  return total;
}

}  // namespace crl::policy
