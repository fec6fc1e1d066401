// The hack guards that run in the candidate's worker (lib/worker/guard_probe.h), their outputs
// compared by the judge with the reference's for the same seeds; then the per-sample guard (the
// first trial again, each sample's inputs scaled by its own factor) where the task calls for it.
#pragma once

#include <optional>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"

namespace crl::eval {

std::optional<Failure> run_guards(Evaluation& e, CandidateWorker& w);

}  // namespace crl::eval
