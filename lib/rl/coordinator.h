// Rank 0's part of the job, an object that exists on rank 0 only (rank 0 is also trainer 0): the
// results file, the dispatch of programs to the evaluators, the exemplar database, verdict reuse,
// the running stage's reward window, the watch over failing evaluation, the writing of checkpoints
// and the progress line. The trainers reach it through TrainerRank::coordinator(), null elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/checkpoint.h"
#include "results/results_writer.h"
#include "rl/dispatch.h"
#include "rl/exemplar_db.h"
#include "rl/failing_evaluation.h"
#include "rl/job_context.h"
#include "rl/job_tables.h"
#include "rl/learning_watch.h"
#include "rl/reward_shaping.h"
#include "rl/run_state.h"
#include "rl/step.h"
#include "rl/status_tally.h"
#include "rl/step_batch.h"
#include "rl/verdict_reuse.h"

namespace crl::rl {

// One rank as /meta records it (every rank sends its own to rank 0 at start-up).
struct RankInfo {
  int rank = 0;
  std::string role;  // "trainer" or "evaluator"
  std::string host;
  std::string device;
  int64_t pid = 0;
};
void to_json(nlohmann::json& j, const RankInfo& r);
void from_json(const nlohmann::json& j, RankInfo& r);

class Coordinator {
 public:
  // Creates DIR/results.h5, or reopens the file of an earlier run of this run folder: its rows past
  // the resume point (all of them without a checkpoint) are marked superseded, since this run
  // re-does those steps; rollout ids go on from the row count, so they stay unique. InputError when
  // the file does not fit the checkpoint or the job file changed.
  explicit Coordinator(const JobContext& context);

  // /meta: the job file, commit, hosts, GPUs, versions, roles, restarts (the largest restart of
  // the file's rows: this run's once it has written a row, see note_restart_of_rows).
  void write_meta(const std::vector<RankInfo>& ranks);
  // Once the trainers start: the exemplar database (rebuilt from the results file when resuming)
  // and the dispatcher to the evaluators.
  void start_training();

  // ---- a generating stage (selftrain, crl) ----
  // A fresh reward window (the checkpoint's when `resume` continues the stage) and the exemplar
  // buckets' width.
  void begin_generating_stage(const StageConfig& stage, const ResumePoint* resume);
  StepPlan plan_step(const StageConfig& stage, int64_t job_step) const;
  // The step's records from every trainer's completions, numbered from the next rollout id.
  StepBatch batch_of(StepPlan plan, int64_t group_size, int64_t policy_version,
                     const std::vector<std::vector<CompletionMessage>>& per_trainer);
  // extract_programs -> judge_programs -> assign_rewards -> outcome_of (step.h).
  StepOutcome judge(StepBatch& batch, const StageConfig& stage);
  // The step's /rollouts rows, texts and /steps row, flushed; its correct programs become exemplars.
  // `done` of `total`: the stage's steps, for the progress line. At the stage's last step, a
  // warning when none of its rollouts was ok (status_tally.h), kept for finish().
  void record_step(const StepBatch& batch, const UpdateStats& update, const std::string& stage_name, int64_t done,
                   int64_t total);
  // An sft step's /steps row, flushed.
  void record_sft_step(StepRow row, int64_t done, int64_t total);
  // Marks the start of a stage (or of its resumed part) for the progress line's rate and ETA.
  void start_stage_clock(int64_t first_step);

  // ---- held-out validation (job key `validation`) ----
  // Judges a validation's completions (each program afresh: no reused verdicts) and writes them to
  // /validation, its ids its own, with their texts in the validation_* stores, flushed; one line
  // says how the policy did. Nothing of it reaches the rewards, the exemplars or an update.
  void validate(const StepPlan& plan, int64_t policy_version, const std::vector<std::vector<CompletionMessage>>& per_trainer,
                const std::string& stage_name);

  // ---- checkpoints ----
  // Writes `contents` with `state` (its row counts and restart filled in here) as user_state,
  // after flushing the results file (the rows it counts are on disk before it exists), then keeps
  // the stage's `keep` newest (run_state.h's prune_checkpoints).
  void write_checkpoint(policy::CheckpointContents contents, RunState state, int64_t keep);
  // The reward window for a checkpoint (null when the stage keeps none).
  nlohmann::json reward_window() const { return normalizer_ ? normalizer_->to_json() : nlohmann::json(); }
  // The checkpoint the running stage started from ("" for the first stage: the job's model).
  const std::string& stage_start_dir() const { return stage_start_dir_; }
  void set_stage_start_dir(std::string dir) { stage_start_dir_ = std::move(dir); }
  const std::string& last_checkpoint() const { return last_checkpoint_; }

  // ---- stop and end ----
  // The first stop signal an evaluator has noted so far, or 0.
  int take_stop_signal() { return dispatcher_->take_stop_signal(); }
  // Stopped: tells the evaluators, closes the results file.
  void stop(const StopNotice& notice);
  // Done: records the trainers' weight hashes and the stages' warnings (/meta `warnings`, and the
  // last line of the log), tells the evaluators, closes the results file; Error when the hashes
  // differ (a data-parallel bug).
  void finish(const std::vector<std::string>& weight_hashes);

 private:
  void open_results_file();
  void open_validation_table();
  // Before the flush of this run's first rows: /meta `restarts` becomes this run's restart, in the
  // same commit as the rows, so /meta never names a restart that wrote no row (a resume that finds
  // the job complete, or a run killed before its first step, leaves it as it was).
  void note_restart_of_rows();
  // The contract's progress line: stage, step/total, reward mean, loss, steps/min, ETA, and (with
  // rewards) the rollouts' statuses, every one that occurred.
  void log_step(const StepRow& row, int64_t done, int64_t total, bool rewards, const std::string& statuses = "") const;
  // The validation's line: held-out tasks, correct completions, tasks with a correct program, statuses.
  void log_validation(const StepBatch& batch, const std::string& stage_name, const std::string& statuses) const;

  const JobContext& context_;
  std::unique_ptr<results::ResultsWriter> writer_;
  int64_t restart_ = 0;          // 0 for a first run, +1 per resume (the rows' restart column)
  int64_t rows_restart_ = 0;     // the largest restart of the file's rows (/meta `restarts`)
  int64_t next_rollout_id_ = 0;
  int64_t next_validation_id_ = 0;  // /validation's row count (job key `validation`)
  std::optional<ProgramDispatcher> dispatcher_;
  std::optional<ExemplarDatabase> exemplars_;
  VerdictReuse verdict_reuse_;  // eval.reuse_verdicts: programs judged before, for this run of the job
  FailingEvaluationWatch failing_evaluation_;
  std::optional<RewardNormalizer> normalizer_;  // the running generating stage's
  StatusTally stage_statuses_;                  // the running generating stage's rollouts (since it resumed)
  bool stage_resumed_ = false;
  ZeroAdvantageWatch zero_advantage_watch_;     // the running crl stage's steps that learnt nothing
  std::vector<std::string> warnings_;           // the stages' warnings, for the job's last line and /meta
  // The checkpoint the running stage started from (the previous stage's end; "" for the first
  // stage), recorded in every checkpoint so that a resumed stage finds the same KL reference.
  std::string stage_start_dir_, last_checkpoint_;
  std::chrono::steady_clock::time_point job_start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point stage_start_ = job_start_;
  std::chrono::steady_clock::time_point last_step_end_ = job_start_;  // when the last /steps row was written
  int64_t stage_first_step_ = 0;
};

}  // namespace crl::rl
