// The re-measure (remeasure.h).
#include "eval/stages/remeasure.h"

#include <fmt/format.h>

#include <algorithm>

#include "eval/stages/load.h"
#include "eval/stages/stop_rule.h"

namespace crl::eval {

bool intervals_agree(const SpeedupEstimate& first, const SpeedupEstimate& again, double max_disagreement) {
  const double gap = std::max(again.ci_low / std::max(first.ci_high, 1e-12), first.ci_low / std::max(again.ci_high, 1e-12));
  return gap <= max_disagreement;
}

std::optional<Failure> remeasure(Evaluation& e, WorkerPool& pool, const CandidateCode& code, CandidateWorker& w,
                                 const Measurement& first) {
  const SpeedupEstimate& m = first.estimate;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto t = Clock::now();
    if (auto f = replace_worker(e, pool, code, w, "remeasure", "re-measuring")) {
      e.trace.step("guard: re-measure", false, f->message, t);
      return f;
    }
    // A fixed number of pairs and no budget to extend them while the interval is narrow enough (a
    // program that is slow only at the start of a process cannot hide its start behind a long
    // measurement); measured on only while it is too wide to disagree (a wide interval agrees with
    // anything: a 3.30x candidate re-measured at 0.10 with an interval of 0.069-3.70 counted as
    // agreement), and never counted as agreement if it stays that wide.
    const int calls = e.cuda() ? e.task_judge.layout.slots : 1;
    const double precise = remeasure_max_relative_ci(e.options.max_relative_ci, e.options.remeasure_max_disagreement);
    const auto again = measure(e, *w.process, TimingPlan{calls, std::max(e.options.min_timed_pairs, 20), 0, "re-measuring", precise});
    if (!again) return timing_failure(e, again.failure(), "guard: re-measure", t);
    const bool agrees = !again->too_noisy && intervals_agree(m, again->estimate, e.options.remeasure_max_disagreement);
    const std::string detail = fmt::format(
        "speedup {:.3f} (CI {:.3f}..{:.3f}) re-measured {} call(s) at a time in a fresh worker{}: {:.3f} (CI {:.3f}..{:.3f}, +-{:.1f}% "
        "in {} pairs; {})",
        m.speedup, m.ci_low, m.ci_high, calls, attempt == 1 ? "" : ", a second time after a disagreement", again->estimate.speedup,
        again->estimate.ci_low, again->estimate.ci_high, 100 * again->estimate.relative_half_width(), again->candidate_us.size(),
        again->stop_reason);
    e.trace.step("guard: re-measure", agrees, detail, t);
    if (auto f = require_precise(*again, "the re-measure")) return f;
    if (agrees) return std::nullopt;
    if (attempt == 2) return Failure::hack_found(HackKind::remeasure_disagreement, detail);
  }
  return std::nullopt;
}

}  // namespace crl::eval
