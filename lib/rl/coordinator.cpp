// Rank 0's part of the job: results file, dispatch, exemplars, rewards, checkpoints, progress (coordinator.h).
#include "rl/coordinator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/provenance.h"
#include "eval/eval_options.h"
#include "eval/verdict.h"
#include "results/results_reader.h"

namespace crl::rl {

namespace fs = std::filesystem;

void to_json(nlohmann::json& j, const RankInfo& r) {
  j = {{"rank", r.rank}, {"role", r.role}, {"host", r.host}, {"device", r.device}, {"pid", r.pid}};
}
void from_json(const nlohmann::json& j, RankInfo& r) {
  r.rank = j.at("rank").get<int>();
  r.role = j.at("role").get<std::string>();
  r.host = j.at("host").get<std::string>();
  r.device = j.at("device").get<std::string>();
  r.pid = j.at("pid").get<int64_t>();
}

Coordinator::Coordinator(const JobContext& context)
    : context_(context), failing_evaluation_(context.job.eval.max_failed_steps) {
  open_results_file();
  // The mark says the newest run of this folder ended complete: not this one, yet.
  std::error_code ignored;
  fs::remove(context_.finished_mark(), ignored);
}

void Coordinator::open_results_file() {
  const JobConfig& job = context_.job;
  const std::optional<ResumePoint>& resume = context_.resume;
  fs::create_directories(context_.run_dir);
  const std::string path = context_.results_path().string();
  if (fs::exists(path)) {
    const results::ResultsReader reader(path);
    const auto tables = reader.tables();
    int64_t last_restart = -1;
    for (const char* table : {"steps", "rollouts"}) {
      if (std::find(tables.begin(), tables.end(), table) == tables.end()) continue;
      const results::ColumnValues restarts = reader.column(table, "restart");  // kept alive: std::get returns into it
      for (int64_t r : std::get<std::vector<int64_t>>(restarts)) last_restart = std::max(last_restart, r);
    }
    if (!resume) {
      // No checkpoint: this run starts over; the job file must still be the one that wrote the file.
      const auto keys = reader.meta_keys();
      if (std::find(keys.begin(), keys.end(), "job_config") != keys.end()) {
        require_unchanged_job(reader.meta_json("job_config"), job.as_json, context_.options.allow_config_change,
                              fmt::format("{} (results file {} from an earlier run, which left no checkpoint)", job.path, path));
      }
    }
    restart_ = std::max<int64_t>(last_restart + 1, 1);
    rows_restart_ = std::max<int64_t>(last_restart, 0);
  } else if (resume) {
    throw InputError(fmt::format("{} holds a checkpoint but no results file {}: restore it, or use another --run-dir",
                                 context_.run_dir, path));
  }
  writer_ = std::make_unique<results::ResultsWriter>(path);
  const int64_t steps_rows = writer_->declare_table("steps", steps_schema(), steps_telemetry_columns());
  const int64_t rollouts_rows = writer_->declare_table("rollouts", rollouts_schema());
  const int64_t keep_steps = resume ? resume->state.steps_rows : 0, keep_rollouts = resume ? resume->state.rollouts_rows : 0;
  if (keep_steps > steps_rows || keep_rollouts > rollouts_rows) {
    throw InputError(fmt::format("{}: the checkpoint {} covers {} /steps and {} /rollouts rows, but the file holds only {} and {}",
                                 path, resume->dir, keep_steps, keep_rollouts, steps_rows, rollouts_rows));
  }
  writer_->set_flag("steps", "superseded", keep_steps, steps_rows, true);
  writer_->set_flag("rollouts", "superseded", keep_rollouts, rollouts_rows, true);
  if (steps_rows > keep_steps || rollouts_rows > keep_rollouts) {
    spdlog::info("{}: {} step row(s) and {} rollout row(s) written after the checkpoint are marked superseded", path,
                 steps_rows - keep_steps, rollouts_rows - keep_rollouts);
  }
  next_rollout_id_ = rollouts_rows;
  if (job.validation.enabled) open_validation_table();
}

// /validation has /rollouts' columns (its rows are rollouts no update sees) and its own ids; rows a
// resumed run re-does are marked superseded as theirs are.
void Coordinator::open_validation_table() {
  const int64_t rows = writer_->declare_table("validation", rollouts_schema());
  const int64_t keep = context_.resume ? context_.resume->state.validation_rows : 0;
  if (keep > rows) {
    throw InputError(fmt::format("{}: the checkpoint {} covers {} /validation rows, but the file holds only {}", writer_->path(),
                                 context_.resume->dir, keep, rows));
  }
  writer_->set_flag("validation", "superseded", keep, rows, true);
  next_validation_id_ = rows;
}

void Coordinator::write_meta(const std::vector<RankInfo>& ranks) {
  const JobConfig& job = context_.job;
  nlohmann::json hosts = nlohmann::json::array(), gpus = nlohmann::json::array();
  for (const RankInfo& r : ranks) {
    hosts.push_back({{"rank", r.rank}, {"role", r.role}, {"host", r.host}});
    gpus.push_back(r.device);
  }
  writer_->set_meta_json("job_config", job.as_json);
  writer_->set_meta("job_file", job.path);
  writer_->set_meta("program_format", program_kind_name(job.program_format));  // every rollout's kind
  writer_->set_meta("git_commit", git_commit());
  writer_->set_meta_json("hosts", hosts);
  writer_->set_meta_json("gpu_names", gpus);
  writer_->set_meta_json("versions", {{"torch", TORCH_VERSION}, {"results_format", 1}});
  writer_->set_meta("share_gpu", job.share_gpu ? "true: trainers and evaluators share GPUs, timings are noisier" : "false");
  writer_->set_meta_json("roles", {{"trainers", job.trainers}, {"evaluators", context_.evaluators}});
  writer_->set_meta("restarts", std::to_string(rows_restart_));
  writer_->set_meta("reward_rule", eval::reward_rule(job.eval.max_relative_ci, eval::EvalOptions{}.noisy_budget_factor));
  writer_->flush();
  spdlog::info("job {}: {} trainer(s), {} evaluator(s), {} task(s), results in {}", job.name, job.trainers, context_.evaluators,
               context_.tasks.size(), writer_->path());
}

void Coordinator::note_restart_of_rows() {
  if (rows_restart_ == restart_) return;
  rows_restart_ = restart_;
  writer_->set_meta("restarts", std::to_string(rows_restart_));  // committed by the flush that commits the rows
}

void Coordinator::start_training() {
  // The exemplar database is the results file's: rebuilt from it (superseded rows left out).
  exemplars_.emplace(context_.resume ? ExemplarDatabase::from_results(results::ResultsReader(writer_->path()), 0.25)
                                     : ExemplarDatabase(0.25));
  dispatcher_.emplace(dist::Group::world(), context_.job.trainers);
}

void Coordinator::begin_generating_stage(const StageConfig& stage, const ResumePoint* resume) {
  normalizer_.emplace(stage.reward.window, stage.reward.clip);
  if (resume != nullptr && !resume->state.normalizer.is_null()) {
    normalizer_->load_json(resume->state.normalizer, resume->dir + "/trainer_state.json");
  }
  exemplars_->set_bucket_width(stage.bucket_width);
  stage_statuses_ = {};
  stage_resumed_ = resume != nullptr;
  zero_advantage_watch_.reset();
}

StepPlan Coordinator::plan_step(const StageConfig& stage, int64_t job_step) const {
  return rl::plan_step(stage, context_.tasks, *exemplars_, context_.job.seed, job_step,
                       [this](const Task& task, const std::vector<PromptExemplar>& shown) { return context_.render_prompt(task, shown); });
}

StepBatch Coordinator::batch_of(StepPlan plan, int64_t group_size, int64_t policy_version,
                                const std::vector<std::vector<CompletionMessage>>& per_trainer) {
  StepBatch batch;
  batch.rollouts = records_from(plan, group_size, per_trainer, next_rollout_id_);
  next_rollout_id_ += static_cast<int64_t>(batch.rollouts.size());
  batch.plan = std::move(plan);
  batch.group_size = group_size;
  batch.policy_version = policy_version;
  return batch;
}

StepOutcome Coordinator::judge(StepBatch& batch, const StageConfig& stage) {
  extract_programs(batch, context_.job.program_format);
  const VerdictReuse::Judge dispatch = [this](const std::vector<WorkItem>& work) { return dispatcher_->evaluate(work); };
  judge_programs(batch, dispatch, context_.job.eval.reuse_verdicts ? &verdict_reuse_ : nullptr);
  assign_rewards(batch, *normalizer_, stage);
  return outcome_of(batch, failing_evaluation_);
}

void Coordinator::record_step(const StepBatch& batch, const UpdateStats& update, const std::string& stage_name, int64_t done,
                              int64_t total) {
  for (Exemplar& e : exemplars_of(batch)) exemplars_->add(std::move(e));
  StepRow row = step_row_of(batch, update, stage_name, context_.evaluators, restart_);
  row.seconds_step = seconds_since(last_step_end_);
  // Rows before their texts: a process that dies between the two (HDF5 flushes its files at exit)
  // leaves texts of no id beyond the rows, and a restart numbers new rollouts from the rows.
  writer_->append("rollouts", rollout_rows(rollout_rows_of(batch, stage_name, context_.job.eval.scale, restart_)));
  for (const StepText& t : texts_of(batch)) writer_->put_text(t.store, t.id, t.text);
  writer_->append("steps", step_rows({row}));
  note_restart_of_rows();
  writer_->flush();
  last_step_end_ = std::chrono::steady_clock::now();
  StatusTally statuses;
  for (const RolloutRecord& r : batch.rollouts) statuses.add(r.verdict.status_text());
  stage_statuses_.add(statuses);
  log_step(row, done, total, true, statuses.text());
  if (std::string warning = zero_advantage_watch_.add(stage_name, row.step, row.zero_advantage_fraction); !warning.empty()) {
    spdlog::warn("{}", warning);
    warnings_.push_back(std::move(warning));
  }
  // A stage that never saw a correct program ended without learning: said, not a silent "done".
  if (done == total) {
    if (std::string warning = stage_warning(stage_name, row.step, stage_statuses_, stage_resumed_); !warning.empty()) {
      spdlog::warn("{}", warning);
      warnings_.push_back(std::move(warning));
    }
  }
}

void Coordinator::validate(const StepPlan& plan, int64_t policy_version, const std::vector<std::vector<CompletionMessage>>& per_trainer,
                           const std::string& stage_name) {
  StepBatch batch;
  batch.group_size = context_.job.validation.group;
  batch.rollouts = records_from(plan, batch.group_size, per_trainer, next_validation_id_);
  next_validation_id_ += static_cast<int64_t>(batch.rollouts.size());
  batch.plan = plan;
  batch.policy_version = policy_version;
  extract_programs(batch, context_.job.program_format);
  judge_programs(batch, [this](const std::vector<WorkItem>& work) { return dispatcher_->evaluate(work); }, nullptr);
  StatusTally statuses;
  for (RolloutRecord& r : batch.rollouts) {
    // The verdict's reward, for the record only: no normaliser, no advantage, no update.
    r.reward = r.verdict.status == eval::VerdictStatus::kInternalError ? 0.0 : r.verdict.reward;
    r.train = false;
    statuses.add(r.verdict.status_text());
  }
  writer_->append("validation", rollout_rows(rollout_rows_of(batch, stage_name, context_.job.eval.scale, restart_)));
  for (const StepText& t : texts_of(batch, "validation_")) writer_->put_text(t.store, t.id, t.text);
  note_restart_of_rows();
  writer_->flush();
  log_validation(batch, stage_name, statuses.text());
}

void Coordinator::record_sft_step(StepRow row, int64_t done, int64_t total) {
  row.restart = restart_;
  writer_->append("steps", step_rows({row}));
  note_restart_of_rows();
  writer_->flush();
  log_step(row, done, total, false);
}

void Coordinator::start_stage_clock(int64_t first_step) {
  stage_start_ = std::chrono::steady_clock::now();
  last_step_end_ = stage_start_;
  stage_first_step_ = first_step;
}

namespace {

// ", entropy 1.234, kl 0.0012, zero-advantage groups 50%": the figures of the row that were measured.
std::string telemetry_text(const StepRow& row) {
  std::string text;
  if (std::isfinite(row.entropy)) text += fmt::format(", entropy {:.3f}", row.entropy);
  if (std::isfinite(row.kl)) text += fmt::format(", kl {:.4f}", row.kl);
  if (std::isfinite(row.zero_advantage_fraction)) {
    text += fmt::format(", zero-advantage groups {:.0f}%", 100 * row.zero_advantage_fraction);
  }
  return text;
}

}  // namespace

void Coordinator::log_validation(const StepBatch& batch, const std::string& stage_name, const std::string& statuses) const {
  std::set<std::string> solved;
  int64_t correct = 0;
  double reward_sum = 0;
  for (const RolloutRecord& r : batch.rollouts) {
    reward_sum += r.reward;
    if (!r.verdict.ok()) continue;
    ++correct;
    solved.insert(r.task);
  }
  const size_t n = batch.rollouts.size();
  spdlog::info("[validation] after {} step {}: {} held-out task(s) x G {}: correct {} of {}, tasks with a correct program {} of {}, "
               "reward mean {:.3f} | {}",
               stage_name, batch.plan.job_step, batch.plan.groups.size(), batch.group_size, correct, n, solved.size(),
               batch.plan.groups.size(), n > 0 ? reward_sum / static_cast<double>(n) : 0.0, statuses);
}

void Coordinator::log_step(const StepRow& row, int64_t done, int64_t total, bool rewards, const std::string& statuses) const {
  // The rate over this process's steps of the stage (a resumed stage counts from its resume).
  const double minutes = seconds_since(stage_start_) / 60.0;
  const int64_t here = done - stage_first_step_;
  const double per_minute = minutes > 0 && here > 0 ? static_cast<double>(here) / minutes : 0;
  const double eta_seconds = per_minute > 0 ? 60.0 * static_cast<double>(total - done) / per_minute : NAN;
  const int64_t rollouts = row.n_ok + row.n_compile_error + row.n_runtime_error + row.n_timeout + row.n_crash + row.n_mismatch +
                           row.n_hack + row.n_format_error + row.n_internal_error;
  const std::string reward = rewards ? fmt::format(", reward mean {:.3f}", row.reward_mean) : "";
  // Every status that occurred, hacks by kind: a step of compile errors and hacks must not read as
  // "ok 5, format_error 3".
  const std::string detail =
      rewards ? fmt::format(" | rollouts {}: {} | evaluators busy {:.0f}%, trainers waited {:.1f} s", rollouts, statuses,
                            100 * row.evaluator_busy_fraction, row.trainer_wait_seconds)
              : "";
  spdlog::info("[{}] step {} ({}/{}){}, loss {:.4f}{}, {:.1f} steps/min, ETA {} | grad_norm {:.3f}, lr {:.2e}{}{}", row.stage,
               row.step, done, total, reward, row.loss, row.skipped ? " (skipped)" : "", per_minute, duration_text(eta_seconds),
               row.grad_norm, row.lr, telemetry_text(row), detail);
}

void Coordinator::write_checkpoint(policy::CheckpointContents contents, RunState state, int64_t keep) {
  const fs::path root = context_.checkpoint_root();
  writer_->flush();  // the rows the checkpoint counts are on disk before it exists
  state.steps_rows = writer_->rows("steps");
  state.rollouts_rows = writer_->rows("rollouts");
  state.validation_rows = context_.job.validation.enabled ? writer_->rows("validation") : 0;
  state.restart = restart_;
  state.stage_start = stage_start_dir_.empty() ? "" : fs::path(stage_start_dir_).filename().string();
  contents.user_state = user_state_json(state, context_.job.as_json);
  const fs::path dir = policy::save_checkpoint(root, contents);
  last_checkpoint_ = dir.string();
  // Keep the newest `keep` finished ones (a DONE marker; not re-hashed here: resume checks them).
  prune_checkpoints(root, dir, keep);
  spdlog::info("checkpoint {}", dir.string());
}

void Coordinator::stop(const StopNotice& notice) {
  dispatcher_->stop_all(notice);
  writer_->close();
}

void Coordinator::finish(const std::vector<std::string>& weight_hashes) {
  writer_->set_meta_json("trainer_weight_sha256", weight_hashes);
  if (!warnings_.empty()) writer_->set_meta_json("warnings", warnings_);
  dispatcher_->stop_all();
  writer_->close();
  if (std::adjacent_find(weight_hashes.begin(), weight_hashes.end(), std::not_equal_to<>()) != weight_hashes.end()) {
    throw Error(fmt::format("the trainers' weights differ after the job (sha256 {}): a data-parallel bug",
                            fmt::join(weight_hashes, ", ")));
  }
  const double seconds = seconds_since(job_start_);
  const std::string results = context_.results_path().string();
  const nlohmann::json mark = {
      {"job", context_.job.name}, {"seconds", seconds}, {"restart", restart_}, {"warnings", warnings_.size()}, {"results", results}};
  write_file_atomically(context_.finished_mark(), mark.dump(2) + "\n");
  if (warnings_.empty()) {
    spdlog::info("job {} done in {:.1f} s; results in {}", context_.job.name, seconds, results);
    return;
  }
  for (const auto& warning : warnings_) spdlog::warn("{}", warning);
  spdlog::warn("job {} done in {:.1f} s with {} warning(s) (above; /meta warnings); results in {}", context_.job.name, seconds,
               warnings_.size(), results);
}

}  // namespace crl::rl
