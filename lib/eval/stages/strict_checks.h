// The stricter checks a candidate faster than its task's estimate must pass before it is rewarded
// (the roofline gate sends it here): `strict_trials` more trials on fresh seeds drawn from the
// secret, of every kind of input the judge makes (ordinary; the task's edge values where it
// declares them; samples scaled apart where copying one sample would pass), each on a value the
// candidate has never seen; then one batch of the timed kind with every call checked, not one.
// An output found wrong is hack:beyond_roofline: the speed came from work skipped.
#pragma once

#include <optional>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"

namespace crl::eval {

// The kind of the i-th stricter trial (pure): edges every second trial where the task declares
// them, samples scaled apart every third where the per-sample guard applies (both at once where
// the two meet), ordinary otherwise.
struct StrictTrialKind {
  bool edges = false;
  bool spread = false;
};
StrictTrialKind strict_trial_kind(int index, bool task_has_edges, bool task_spreads);

std::optional<Failure> run_strict_checks(Evaluation& e, CandidateWorker& w);

}  // namespace crl::eval
