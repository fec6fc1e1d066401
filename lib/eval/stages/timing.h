// The timing stage: pairs of timed batches (one call per slot, fresh secret inputs for every pair,
// a copy for each program), the reference's in its own timing worker and the candidate's in its
// worker, each while the other is frozen and the GPU idle; both measured by the evaluator's clock
// around the request, less a request's fixed cost. After each pair one slot, chosen afterwards, is
// checked (inputs unchanged, outputs right). Rounds of pairs until the stop rule says enough.
#pragma once

#include <string>
#include <vector>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"
#include "eval/timing_stats.h"

namespace crl::eval {

struct Measurement {
  std::vector<double> reference_us, candidate_us;  // per call, pair by pair
  SpeedupEstimate estimate;
  int rounds = 0;
  std::string stop_reason;
  std::string pair_cost;  // where a pair's wall time went (timed calls, the judge's requests, the rest)
};

struct TimingPlan {
  int slots = 1;               // calls per timed batch
  int min_pairs = 20;
  double budget_seconds = 10;  // 0: exactly min_pairs pairs
  std::string purpose;         // "timing", "re-measuring": starts the messages
};

// A failure's message is what the step says. Failures of crl's side (the judge, the reference's
// worker, a GPU that stays busy) have status internal_error and cleanup drop_judge: the caller
// turns them into the judge's failure (timing_failure).
Result<Measurement> measure(Evaluation& e, WorkerProcess& candidate, const TimingPlan& plan);

// A measurement's failure as the verdict says it, its step recorded under `step_name`.
Failure timing_failure(Evaluation& e, const Failure& failed, const std::string& step_name, const Clock::time_point& since);

}  // namespace crl::eval
