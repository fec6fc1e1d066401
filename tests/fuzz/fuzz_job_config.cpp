// libFuzzer harness: a job file (lib/rl/job_config.h), parsed as `crl run` reads it; whatever
// parses is compared with itself as resume does. Malformed YAML or values must be an InputError
// naming the key, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "rl/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const crl::rl::JobConfig job = crl::rl::parse_job_config(text, "fuzzed.yaml", "/crl-fuzz/jobs");
    if (!crl::rl::changed_job_keys(job.as_json, job.as_json).empty()) __builtin_trap();
  } catch (const crl::InputError&) {
  }
  return 0;
}
