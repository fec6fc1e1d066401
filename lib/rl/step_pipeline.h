// A generating stage of the job (selftrain, crl) on a trainer rank: its steps, each the data flow
// of step.h's stages between the trainers and rank 0's coordinator:
//
//   run_step (max_staleness 0, strictly on-policy):
//     collect           every trainer's rollouts of the step to rank 0 (a StepBatch there)
//     judge             rank 0: extract_programs -> judge_programs -> assign_rewards -> outcome_of
//     share             the StepOutcome (advantages, which rollouts train) to every trainer
//     update_policy     one optimiser step (or updates_per_batch) on each trainer's own rollouts
//     record_step       rank 0: /rollouts, texts, /steps; correct programs become exemplars
//   then the next step's plan_step (rank 0, broadcast) and generate_rollouts (every trainer).
//
//   run_step_overlapped (max_staleness 1): the same, but between collect and update every trainer
//     generates step k+1 (from a plan made before step k's verdicts) while rank 0 judges step k,
//     rank 0's share on a second thread beside its dispatch (vLLM's step_with_batch_queue). The
//     update's ratio is then to the generating policy's log-probs.
//
// A checkpoint at a step boundary keeps the step generated but not yet judged (run_state.h).
#pragma once

#include <cstddef>

#include "rl/job_config.h"
#include "rl/trainer_rank.h"

namespace crl::rl {

// Runs stage `index` from its start or its resume point to its end checkpoint, or until the
// trainers agree to stop or evaluation failed (checkpointed). Collective over the trainers.
void run_generating_stage(TrainerRank& rank, size_t index, const StageConfig& stage);

}  // namespace crl::rl
