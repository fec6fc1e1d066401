// The roofline gate: a candidate faster than every correct program can be (its outputs written,
// and whatever floor its task's spec declares, at the memory's bandwidth and the tensor cores'
// rate) is hack:beyond_roofline; one faster than the task's estimate (its spec's bytes and flops:
// every input read, every operation done) is not judged by that alone, since a correct program may
// skip what the estimate counts (level2/080's output is provably zero), but earns a reward only
// after the stricter checks (stages/strict_checks.h). GPU peaks by device name; on the CPU only
// where peaks are given (EvalOptions::peak_*).
#pragma once

#include <optional>
#include <string>

#include "eval/failure.h"
#include "eval/roofline.h"
#include "eval/stages/evaluation.h"

namespace crl::eval {

// What one call of a task moves and computes: the task's estimate, and the floor every correct
// program must reach (its outputs' bytes written, or more where the spec's `floor` says so).
struct RooflineWork {
  double bytes = 0, flops = 0;
  double floor_bytes = 0, floor_flops = 0;
};
RooflineWork roofline_work(const TaskSpec& spec, const std::string& scale, double output_bytes);

struct RooflineCheck {
  bool passed = true;            // not faster than the floor
  bool beyond_estimate = false;  // faster than the estimate allows: the stricter checks decide
  std::string detail;
};
// Pure: a call of `took_seconds` against the least times of `work`'s floor and estimate on `peaks`
// (none: skipped, passed, and the detail says why, naming `device_name`).
RooflineCheck roofline_check(double took_seconds, const RooflineWork& work, const std::optional<DevicePeaks>& peaks, double margin,
                             const std::string& device_name);

// Whether the gate runs: on the GPU, and on the CPU where the options give peaks.
bool roofline_applies(const EvalOptions& options);

// hack:beyond_roofline for a candidate whose median call beats the floor; the stricter checks'
// failure for one that beats only the estimate and fails them.
std::optional<Failure> roofline_gate(Evaluation& e, CandidateWorker& w, double candidate_median_us);

}  // namespace crl::eval
