// libFuzzer harness: job files full of YAML anchors and aliases, parsed as `crl run` parses them
// (rl::parse_job_config, through core's parse_yaml). Random bytes rarely make an anchor and an alias
// that refer to each other, so the input here is a recipe: nested mappings and sequences whose
// values are scalars, anchors (&aN) and aliases (*aM, to an anchor before, around or after them:
// cycles and "billion laughs" included), around the keys of a real job file. Only InputError may
// come out, and quickly (tools/fuzz.sh's -timeout catches a hang).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "rl/job_config.h"

namespace {

const char* const kKeys[] = {"name", "model", "seed", "stages", "kind", "steps", "lr", "eval", "trials", "tasks",
                             "ids", "roles", "trainers", "sampling", "x"};

void value(FuzzedDataProvider& in, std::string& out, int depth, int& anchors, const std::string& indent) {
  const int choice = depth > 6 ? 0 : in.ConsumeIntegralInRange(0, 4);
  if (in.ConsumeIntegralInRange(0, 3) == 0) out += "&a" + std::to_string(anchors++) + " ";
  switch (choice) {
    case 0:
      out += in.ConsumeBool() ? std::to_string(in.ConsumeIntegral<int16_t>()) : "v";
      out += "\n";
      break;
    case 1:  // an alias: to any anchor number, made or not yet
      out += "*a" + std::to_string(in.ConsumeIntegralInRange(0, anchors + 1)) + "\n";
      break;
    case 2: {  // a flow sequence of aliases: the bomb's shape
      out += "[";
      const int n = in.ConsumeIntegralInRange(0, 10);
      for (int i = 0; i < n; ++i) out += (i ? ", *a" : "*a") + std::to_string(in.ConsumeIntegralInRange(0, anchors));
      out += "]\n";
      break;
    }
    default: {  // a block mapping or sequence
      out += "\n";
      const int n = in.ConsumeIntegralInRange(1, 4);
      const bool map = choice == 3;
      for (int i = 0; i < n; ++i) {
        out += indent + "  " + (map ? std::string(kKeys[in.ConsumeIntegralInRange<size_t>(0, std::size(kKeys) - 1)]) + ": " : "- ");
        value(in, out, depth + 1, anchors, indent + "  ");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string text = "name: fuzz\nmodel: m\n";
  int anchors = 0;
  const int keys = in.ConsumeIntegralInRange(1, 6);
  for (int i = 0; i < keys; ++i) {
    text += kKeys[in.ConsumeIntegralInRange<size_t>(2, std::size(kKeys) - 1)];
    text += ": ";
    value(in, text, 0, anchors, "");
  }
  try {
    crl::rl::parse_job_config(text, "fuzzed.yaml", "/crl-fuzz/jobs");
  } catch (const crl::InputError&) {
  }
  return 0;
}
