// libFuzzer harness: a model's config.json; what parses must also survive to_json and re-parse.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "policy/config.h"
#include "policy/model_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const auto config = crl::policy::ModelConfig::from_json(j, "fuzz/config.json");
    const auto again = crl::policy::ModelConfig::from_json(config.to_json(), "fuzz/config.json");
    if (again.hidden_size != config.hidden_size || again.num_hidden_layers != config.num_hidden_layers) __builtin_trap();
    if (config.num_hidden_layers <= 64) crl::policy::parameter_shapes(config);
  } catch (const crl::InputError&) {
  }
  return 0;
}
