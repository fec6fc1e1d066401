// The timing stage: pairs of timed batches (one call per slot, fresh secret inputs for every pair,
// a copy for each program), the reference's in its own timing worker and the candidate's in its
// worker, each while the other is frozen and the GPU idle; both measured by the evaluator's clock
// around the request, less a request's fixed cost. After each pair one slot, chosen afterwards, is
// checked (inputs unchanged, outputs right). Rounds of pairs until the stop rule says enough.
#pragma once

#include <optional>
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
  std::string pair_cost;   // where a pair's wall time went (timed calls, the judge's requests, the rest)
  bool too_noisy = false;  // it ended with its interval wider than the plan's max_relative_ci
};

struct TimingPlan {
  int slots = 1;               // calls per timed batch
  int min_pairs = 20;
  double budget_seconds = 10;  // 0: min_pairs pairs (more only while the interval is too wide)
  std::string purpose;         // "timing", "re-measuring": starts the messages
  double max_relative_ci = 0.1;  // the widest interval it may end with (StopRule)
};

// A failure's message is what the step says. Failures of crl's side (the judge, the reference's
// worker, a GPU that stays busy) have status internal_error and cleanup drop_judge: the caller
// turns them into the judge's failure (timing_failure).
Result<Measurement> measure(Evaluation& e, WorkerProcess& candidate, const TimingPlan& plan);

// A measurement's failure as the verdict says it, its step recorded under `step_name`.
Failure timing_failure(Evaluation& e, const Failure& failed, const std::string& step_name, const Clock::time_point& since);

// A measurement that ended too noisy is never rewarded: internal_error (crl could not measure it
// precisely enough on this machine now; the job leaves it out of the group), saying how wide.
std::optional<Failure> require_precise(const Measurement& m, const std::string& purpose);

// One call of a timed batch checked: the slot's inputs unchanged (the judge makes them again from
// `seed`), then its outputs, as `reply` describes them, against the reference's on the same inputs.
// `where` names the call in messages ("timing pair 3 slot 5"). The outputs are held to the float64
// reference; `precision_ratio`, if given, receives the check's ratio (-1 where none was computed).
std::optional<Failure> check_timed_call(Evaluation& e, WorkerProcess& candidate, const worker::TimeReply& reply, int slots, int slot,
                                        uint64_t seed, const std::string& where, double* precision_ratio = nullptr);

}  // namespace crl::eval
