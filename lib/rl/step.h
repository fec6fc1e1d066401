// The stages of a generating step that need no MPI, each a function over the step's data
// (step_batch.h), in the order the step runs them:
//   plan_step -> (generate_rollouts, collect: step_pipeline.h) -> extract_programs -> judge_programs
//   -> assign_rewards -> outcome_of -> (update_policy: step_pipeline.h) -> the rows record_step writes
// The MPI-bound stages call these; tests call them directly (tests/rl/step_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rl/exemplar_db.h"
#include "rl/failing_evaluation.h"
#include "rl/job_config.h"
#include "rl/job_tables.h"
#include "rl/prompt.h"
#include "rl/reward_shaping.h"
#include "rl/step_batch.h"
#include "rl/verdict_reuse.h"
#include "suite/suite.h"

namespace crl::rl {

// The step's tasks: `batch` of them, without repetition while the list allows, drawn from the job's
// seed and the step (so a resumed run draws the same).
std::vector<const Task*> draw_tasks(const std::vector<const Task*>& tasks, int64_t batch, uint64_t seed, int64_t job_step);

// The policy's prompt for a task showing `exemplars` (prompt.h's build_prompt with the job's instructions).
using PromptRenderer = std::function<std::string(const Task& task, const std::vector<PromptExemplar>& exemplars)>;

// The step's tasks, each with K exemplars sampled from the database (crl stages with K > 0) and its
// prompt. Draws from seeds.h's task_draw_seed and exemplar_seed.
StepPlan plan_step(const StageConfig& stage, const std::vector<const Task*>& tasks, const ExemplarDatabase& exemplars,
                   uint64_t seed, int64_t job_step, const PromptRenderer& render);

// The plan of a held-out validation after job step `job_step` (job key `validation`): one group per
// held-out task, its prompt without exemplars. Deterministic: every trainer makes the same.
StepPlan plan_validation(const std::vector<const Task*>& held_out, int64_t job_step, const PromptRenderer& render);

// Rank 0's records of the step from every trainer's completions (in any order): rollout index
// group * G + sample gets rollout id first_id + index and its group's task. Throws Error for an
// index outside the plan or a rollout sent twice or never.
std::vector<RolloutRecord> records_from(const StepPlan& plan, int64_t group_size,
                                        const std::vector<std::vector<CompletionMessage>>& per_trainer, int64_t first_id);

// Each completion's program (completion.h): has_program, or the format problem.
void extract_programs(StepBatch& batch, ProgramKind kind = ProgramKind::crl);

// The verdict of every rollout: its program's, from `judge` (through `reuse` when given: programs
// judged before take their verdict, verdict_reuse.h), or format_error for a rollout without one.
// Sets timings.seconds_evaluate and evaluator_busy_seconds.
void judge_programs(StepBatch& batch, const VerdictReuse::Judge& judge, VerdictReuse* reuse);

// Rewards (the verdict's; 0 and left out for internal_error), normalised rewards and advantages
// (crl: reward_shaping.h), and which rollouts train (crl: the counted ones; selftrain: the correct
// ones at least stage.min_speedup fast).
void assign_rewards(StepBatch& batch, RewardNormalizer& normalizer, const StageConfig& stage);

// What the trainers update from; `watch` sees the step's internal errors (eval.max_failed_steps).
StepOutcome outcome_of(const StepBatch& batch, FailingEvaluationWatch& watch);

// What the update did, for the step's row.
struct UpdateStats {
  double loss = 0, grad_norm = 0, lr = 0;
  int64_t tokens_trained = 0;
  bool skipped = true;  // no update (nothing to train, no loss tokens, or a non-finite gradient)
  // Means over the (last) update's loss tokens on all trainers; NaN when not measured: no update,
  // no KL reference (grpo.kl 0, selftrain), no clipping (selftrain's loss).
  double entropy = std::nan(""), kl = std::nan(""), clip_fraction = std::nan("");
};

// The step's /rollouts rows. `scale`: the job's eval.scale, for verdicts that name none.
std::vector<RolloutRow> rollout_rows_of(const StepBatch& batch, const std::string& stage_name, const std::string& scale,
                                        int64_t restart);

// The step's /steps row but for seconds_step (the writer's clock); `evaluators`: for the busy fraction.
StepRow step_row_of(const StepBatch& batch, const UpdateStats& update, const std::string& stage_name, int evaluators,
                    int64_t restart);

// The step's texts, keyed by rollout id: prompts, completions, programs (those that have one) and
// logs (the verdict's message, its judge step's detail, which names the secret that replays the
// inputs, and its compile and worker logs), in rollout order. `store_prefix` goes before each
// store's name ("validation_": the held-out validation's own stores, keyed by its own ids).
struct StepText {
  std::string store;
  int64_t id;
  std::string text;
};
std::vector<StepText> texts_of(const StepBatch& batch, const std::string& store_prefix = "");

// The step's correct programs with a measured speedup: the exemplar database's new entries.
std::vector<Exemplar> exemplars_of(const StepBatch& batch);

}  // namespace crl::rl
