// The correctness trials: each trial's inputs written into slot 0 by the judge, the candidate run on
// them, its outputs and then its inputs checked; then, where the task declares edges, the edge
// trials (values at its clamp bounds, signs, large magnitudes: program/edge_inputs.h).
#pragma once

#include <optional>
#include <string>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"
#include "eval/stages/outputs.h"

namespace crl::eval {

std::optional<Failure> run_trials(Evaluation& e, CandidateWorker& w);

// Whether the judge finds the inputs of `slot` changed from what `seed` makes: "" when unchanged,
// else what changed; nothing when the judge failed. `keep`: the judge keeps the inputs it made, for
// a reference_slot of the same seed next.
std::optional<std::string> inputs_changed(Evaluation& e, int slot, uint64_t seed, bool edges, bool keep);

}  // namespace crl::eval
