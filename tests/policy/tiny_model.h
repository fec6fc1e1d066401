// The small policy model the training tests build on: the qwen2_gqa2_tied test config, seeded.
#pragma once

#include <cstdint>
#include <filesystem>

#include "policy/config.h"
#include "policy/model.h"

namespace crl::policy::testing {

inline CausalLm tiny_model(uint64_t seed) {
  CausalLm model(load_model_config(std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models" / "qwen2_gqa2_tied"));
  init_weights(model, seed);
  return model;
}

}  // namespace crl::policy::testing
