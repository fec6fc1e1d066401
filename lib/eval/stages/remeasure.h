// The re-measure: a large speedup is measured again, in a fresh worker, for a fixed number of
// pairs (more only while its interval is too wide to disagree: remeasure_max_relative_ci); the two
// intervals must not lie further apart than remeasure_max_disagreement, and a re-measure that stays
// too wide is never agreement but internal_error (machine too noisy). On the CPU
// one call per request; on the GPU batches of the timing's size (there a request's fixed cost is
// hundreds of us: single calls would shrink a real 5x on a 100 us kernel toward 2x and call it a
// disagreement). A disagreement is measured once more in another fresh worker, and only two
// disagreements are a hack: a burst of load on a shared machine fakes one, a program that fools one
// way of timing fakes both.
#pragma once

#include <optional>
#include <string>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"
#include "eval/stages/timing.h"
#include "eval/worker_pool.h"

namespace crl::eval {

// Pure: whether two intervals agree (apart only when one lies wholly above the other by more than
// `max_disagreement`).
bool intervals_agree(const SpeedupEstimate& first, const SpeedupEstimate& again, double max_disagreement);

std::optional<Failure> remeasure(Evaluation& e, WorkerPool& pool, const CandidateCode& code, CandidateWorker& w,
                                 const Measurement& first);

}  // namespace crl::eval
