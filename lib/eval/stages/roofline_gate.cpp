// The roofline gate (roofline_gate.h).
#include "eval/stages/roofline_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "eval/stages/strict_checks.h"

namespace crl::eval {

RooflineWork roofline_work(const TaskSpec& spec, const std::string& scale, double output_bytes) {
  return {spec.bytes_at(scale), spec.flops_at(scale), std::max(output_bytes, spec.floor_bytes_at(scale)), spec.floor_flops_at(scale)};
}

RooflineCheck roofline_check(double took_seconds, const RooflineWork& work, const std::optional<DevicePeaks>& peaks, double margin,
                             const std::string& device_name) {
  if (!peaks) return {true, false, fmt::format("skipped: no peaks known for '{}'", device_name)};
  const double floor = roofline_seconds(work.floor_bytes, work.floor_flops, *peaks, margin);
  const double estimate = roofline_seconds(work.bytes, work.flops, *peaks, margin);
  RooflineCheck check;
  check.passed = took_seconds >= floor;
  check.beyond_estimate = check.passed && took_seconds < estimate;
  check.detail = fmt::format(
      "{:.1f} us per call; the {} allows at least {:.3g} us for what every correct program must do ({:.3g} bytes, {:.3g} flops) "
      "and {:.1f} us for the task's estimate ({:.3g} bytes, {:.3g} flops) ({:g}x margin){}",
      took_seconds * 1e6, peaks->model, floor * 1e6, work.floor_bytes, work.floor_flops, estimate * 1e6, work.bytes, work.flops, margin,
      check.beyond_estimate ? ": faster than the estimate, so the stricter checks decide" : "");
  return check;
}

bool roofline_applies(const EvalOptions& options) {
  return options.backend == Backend::cuda || (options.peak_bytes_per_second > 0 && options.peak_flops_per_second > 0);
}

std::optional<Failure> roofline_gate(Evaluation& e, CandidateWorker& w, double candidate_median_us) {
  auto peaks = e.cuda() ? peaks_for_device(e.task_judge.device_name) : std::nullopt;
  if (e.options.peak_bytes_per_second > 0 && e.options.peak_flops_per_second > 0) {
    peaks = DevicePeaks{e.cuda() ? "GPU (peaks given)" : "CPU (peaks given)", e.options.peak_bytes_per_second,
                        e.options.peak_flops_per_second};
  }
  const auto& out = e.task_judge.output_bytes;
  const double output_bytes = static_cast<double>(std::accumulate(out.begin(), out.end(), int64_t{0}));
  const RooflineCheck check = roofline_check(candidate_median_us * 1e-6, roofline_work(e.task.spec, e.options.scale, output_bytes), peaks,
                                             e.options.roofline_margin, e.cuda() ? e.task_judge.device_name : "the CPU");
  e.trace.step("guard: roofline", check.passed, check.detail, Clock::now());
  if (!check.passed) return Failure::hack_found(HackKind::beyond_roofline, "faster than any correct program can be: " + check.detail);
  if (!check.beyond_estimate) return std::nullopt;
  return run_strict_checks(e, w);
}

}  // namespace crl::eval
