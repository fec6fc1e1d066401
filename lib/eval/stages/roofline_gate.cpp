// The roofline gate (roofline_gate.h).
#include "eval/stages/roofline_gate.h"

#include <fmt/format.h>

namespace crl::eval {

RooflineCheck roofline_check(double took_seconds, double bytes, double flops, const std::optional<DevicePeaks>& peaks, double margin,
                             const std::string& device_name) {
  if (!peaks) return {true, fmt::format("skipped: no peaks known for '{}'", device_name)};
  const double least = roofline_seconds(bytes, flops, *peaks, margin);
  return {took_seconds >= least,
          fmt::format("{:.1f} us per call; the {} allows at least {:.1f} us for {:.3g} bytes and {:.3g} flops ({:g}x margin)",
                      took_seconds * 1e6, peaks->model, least * 1e6, bytes, flops, margin)};
}

std::optional<Failure> roofline_gate(Evaluation& e, double candidate_median_us) {
  auto peaks = peaks_for_device(e.task_judge.device_name);
  if (e.options.peak_bytes_per_second > 0 && e.options.peak_flops_per_second > 0) {
    peaks = DevicePeaks{"GPU (peaks given)", e.options.peak_bytes_per_second, e.options.peak_flops_per_second};
  }
  const RooflineCheck check = roofline_check(candidate_median_us * 1e-6, e.task.spec.bytes_at(e.options.scale),
                                             e.task.spec.flops_at(e.options.scale), peaks, e.options.roofline_margin,
                                             e.task_judge.device_name);
  e.trace.step("guard: roofline", check.passed, check.detail, Clock::now());
  if (!check.passed) return Failure::hack_found(HackKind::beyond_roofline, "faster than the hardware allows: " + check.detail);
  return std::nullopt;
}

}  // namespace crl::eval
