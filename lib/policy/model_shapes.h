// The parameters a ModelConfig implies (Hugging Face names and shapes) and the check of a
// checkpoint's safetensors headers against them, made before any model memory is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/config.h"
#include "policy/safetensors_header.h"

namespace crl::policy {

struct ParameterShape {
  std::string name;             // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
};

// Every parameter CausalLm(config) registers, in its registration order.
std::vector<ParameterShape> parameter_shapes(const ModelConfig& config);

// Throws InputError naming `origin` (the checkpoint) and the tensor unless `entries` hold every
// parameter of `config` with its shape and a floating dtype, and nothing else but what
// load_state tolerates (rotary inv_freq buffers; lm_head.weight of a tied model, shaped as the
// embedding).
void check_checkpoint_shapes(const ModelConfig& config, const std::vector<SafetensorsEntry>& entries,
                             const std::string& origin);

}  // namespace crl::policy
