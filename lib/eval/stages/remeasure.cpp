// The re-measure (remeasure.h).
#include "eval/stages/remeasure.h"

#include <fmt/format.h>

#include <algorithm>

#include "eval/stages/load.h"

namespace crl::eval {

bool intervals_agree(const SpeedupEstimate& first, const SpeedupEstimate& again, double max_disagreement) {
  const double gap = std::max(again.ci_low / std::max(first.ci_high, 1e-12), first.ci_low / std::max(again.ci_high, 1e-12));
  return gap <= max_disagreement;
}

std::optional<Failure> remeasure(Evaluation& e, WorkerPool& pool, const std::string& library, CandidateWorker& w,
                                 const Measurement& first) {
  const SpeedupEstimate& m = first.estimate;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto t = Clock::now();
    if (auto f = replace_worker(e, pool, library, w, "remeasure", "re-measuring")) {
      e.trace.step("guard: re-measure", false, f->message, t);
      return f;
    }
    // A fixed number of pairs (no budget to extend it): a program that is slow only at the start of
    // a process cannot hide its start behind a long measurement.
    const int calls = e.cuda() ? e.task_judge.layout.slots : 1;
    const auto again = measure(e, *w.process, TimingPlan{calls, std::max(e.options.min_timed_pairs, 20), 0, "re-measuring"});
    if (!again) return timing_failure(e, again.failure(), "guard: re-measure", t);
    const bool agrees = intervals_agree(m, again->estimate, e.options.remeasure_max_disagreement);
    const std::string detail = fmt::format(
        "speedup {:.3f} (CI {:.3f}..{:.3f}) re-measured {} call(s) at a time in a fresh worker{}: {:.3f} (CI {:.3f}..{:.3f})",
        m.speedup, m.ci_low, m.ci_high, calls, attempt == 1 ? "" : ", a second time after a disagreement", again->estimate.speedup,
        again->estimate.ci_low, again->estimate.ci_high);
    e.trace.step("guard: re-measure", agrees, detail, t);
    if (agrees) return std::nullopt;
    if (attempt == 2) return Failure::hack_found(HackKind::remeasure_disagreement, detail);
  }
  return std::nullopt;
}

}  // namespace crl::eval
