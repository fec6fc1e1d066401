// The small policy model the training tests build on (the qwen2_gqa2_tied test config, seeded),
// and LoRA adapters made to act on it.
#pragma once

#include <cstdint>
#include <filesystem>

#include <torch/torch.h>

#include <string>

#include "policy/config.h"
#include "policy/lora.h"
#include "policy/model.h"

namespace crl::policy::testing {

inline CausalLm tiny_model(uint64_t seed) {
  CausalLm model(load_model_config(std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models" / "qwen2_gqa2_tied"));
  init_weights(model, seed);
  return model;
}

// New adapters leave the model as it was (B = 0): draw B from N(0, std) so that they change it.
inline void randomize_lora_b(LoraAdapters& lora, double std) {
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : lora.named_parameters()) {
    if (name.find("lora_B") != std::string::npos) tensor.normal_(0.0, std);
  }
}

}  // namespace crl::policy::testing
