// The roofline gate: no program moves its task's least traffic faster than the memory allows, or
// does its operations faster than the tensor cores (bf16, dense) allow (GPU only).
#pragma once

#include <optional>
#include <string>

#include "eval/failure.h"
#include "eval/roofline.h"
#include "eval/stages/evaluation.h"

namespace crl::eval {

struct RooflineCheck {
  bool passed = true;
  std::string detail;
};
// Pure: a call of `took_seconds` against the least time for `bytes` and `flops` on `peaks` (none:
// skipped, passed, and the detail says why, naming `device_name`).
RooflineCheck roofline_check(double took_seconds, double bytes, double flops, const std::optional<DevicePeaks>& peaks, double margin,
                             const std::string& device_name);

// hack:beyond_roofline for a candidate whose median call beats the least time.
std::optional<Failure> roofline_gate(Evaluation& e, double candidate_median_us);

}  // namespace crl::eval
