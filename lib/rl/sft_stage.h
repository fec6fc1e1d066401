// An sft stage of the job: each step trains on a batch of the data file's examples (no generation,
// no evaluators), the batch's examples dealt to the trainers in turn.
#pragma once

#include <cstddef>

#include "rl/job_config.h"
#include "rl/trainer_rank.h"

namespace crl::rl {

// Runs stage `index` from its start or its resume point to its end checkpoint, or until the
// trainers agree to stop (checkpointed). Collective over the trainers.
void run_sft_stage(TrainerRank& rank, size_t index, const StageConfig& stage);

}  // namespace crl::rl
