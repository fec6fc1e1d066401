// The MPI-free stages of a generating step (step.h).
#include "rl/step.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/clock.h"
#include "core/error.h"
#include "core/seeds.h"
#include "core/statistics.h"
#include "rl/completion.h"

namespace crl::rl {

std::vector<const Task*> draw_tasks(const std::vector<const Task*>& tasks, int64_t batch, uint64_t seed, int64_t job_step) {
  std::mt19937_64 rng(seeds::task_draw_seed(seed, job_step));
  std::vector<const Task*> out;
  while (static_cast<int64_t>(out.size()) < batch) {
    std::vector<const Task*> round = tasks;
    std::shuffle(round.begin(), round.end(), rng);
    for (const Task* t : round) {
      if (static_cast<int64_t>(out.size()) < batch) out.push_back(t);
    }
  }
  return out;
}

StepPlan plan_step(const StageConfig& stage, const std::vector<const Task*>& tasks, const ExemplarDatabase& exemplars,
                   uint64_t seed, int64_t job_step, const PromptRenderer& render) {
  const bool shows_exemplars = stage.kind == StageKind::kCrl && stage.exemplars > 0;
  std::mt19937_64 rng(seeds::exemplar_seed(seed, job_step));
  StepPlan plan;
  plan.job_step = job_step;
  for (const Task* task : draw_tasks(tasks, stage.batch, seed, job_step)) {
    std::vector<PromptExemplar> shown;
    std::vector<int64_t> ids;
    if (shows_exemplars) {
      for (const Exemplar* e : exemplars.sample(task->id, static_cast<size_t>(stage.exemplars), stage.tau, rng)) {
        shown.push_back({e->program, e->speedup});
        ids.push_back(e->rollout_id);
      }
    }
    plan.groups.push_back({task->id, render(*task, shown), join_ids(ids)});
  }
  return plan;
}

StepPlan plan_validation(const std::vector<const Task*>& held_out, int64_t job_step, const PromptRenderer& render) {
  StepPlan plan;
  plan.job_step = job_step;
  for (const Task* task : held_out) plan.groups.push_back({task->id, render(*task, {}), ""});
  return plan;
}

std::vector<RolloutRecord> records_from(const StepPlan& plan, int64_t group_size,
                                        const std::vector<std::vector<CompletionMessage>>& per_trainer, int64_t first_id) {
  const int64_t n = static_cast<int64_t>(plan.groups.size()) * group_size;
  std::vector<RolloutRecord> records(static_cast<size_t>(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const auto& messages : per_trainer) {
    for (const CompletionMessage& m : messages) {
      const int64_t index = m.group * group_size + m.sample;
      if (m.sample < 0 || m.sample >= group_size || index < 0 || index >= n) {
        throw Error(fmt::format("a trainer sent rollout index {} of {}", index, n));
      }
      if (seen[static_cast<size_t>(index)]) throw Error(fmt::format("two trainers sent rollout index {}", index));
      seen[static_cast<size_t>(index)] = true;
      RolloutRecord& r = records[static_cast<size_t>(index)];
      r.group = m.group;
      r.sample = m.sample;
      r.completion = m.text;
      r.completion_tokens = m.tokens;
      r.id = first_id + index;
      r.task = plan.groups[static_cast<size_t>(m.group)].task;
    }
  }
  if (const auto missing = std::find(seen.begin(), seen.end(), false); missing != seen.end()) {
    throw Error(fmt::format("no trainer sent rollout index {} of {}", missing - seen.begin(), n));
  }
  return records;
}

void extract_programs(StepBatch& batch, ProgramKind kind) {
  for (RolloutRecord& r : batch.rollouts) {
    ParsedCompletion parsed = parse_completion(r.completion, fmt::format("rollout {}", r.id), kind);
    r.has_program = parsed.ok;
    r.program = std::move(parsed.program_text);
    r.format_problem = std::move(parsed.problem);
  }
}

namespace {

// The verdict of a rollout whose completion holds no program (nothing was evaluated).
eval::Verdict format_error_verdict(const RolloutRecord& r) {
  eval::Verdict v;
  v.task_id = r.task;
  v.candidate = fmt::format("rollout {}", r.id);
  v.status = eval::VerdictStatus::kFormatError;
  v.message = r.format_problem;
  v.reward = 0;
  return v;
}

}  // namespace

void judge_programs(StepBatch& batch, const VerdictReuse::Judge& judge, VerdictReuse* reuse) {
  std::vector<WorkItem> work;
  for (const RolloutRecord& r : batch.rollouts) {
    if (r.has_program) work.push_back({r.id, r.task, r.program, fmt::format("rollout {}", r.id)});
  }
  const auto start = std::chrono::steady_clock::now();
  std::map<int64_t, DispatchedVerdict> verdicts;
  if (reuse != nullptr) {
    const size_t programs = work.size();
    verdicts = reuse->evaluate(std::move(work), batch.plan.job_step, judge);
    if (reuse->reused_last() + reuse->audits_last() > 0) {
      spdlog::info("step {}: {} of {} programs judged before (eval.reuse_verdicts), {} of them judged again as audits",
                   batch.plan.job_step, reuse->reused_last() + reuse->audits_last(), programs, reuse->audits_last());
    }
  } else {
    verdicts = judge(work);
  }
  batch.timings.seconds_evaluate = seconds_since(start);
  batch.timings.evaluator_busy_seconds = 0;
  for (const auto& [id, v] : verdicts) batch.timings.evaluator_busy_seconds += v.seconds;
  for (RolloutRecord& r : batch.rollouts) {
    if (const auto it = verdicts.find(r.id); it != verdicts.end()) {
      r.verdict = it->second.verdict;
      r.evaluator_rank = it->second.evaluator_rank;
    } else {
      r.verdict = format_error_verdict(r);
      r.evaluator_rank = -1;
    }
  }
}

void assign_rewards(StepBatch& batch, RewardNormalizer& normalizer, const StageConfig& stage) {
  const size_t n = batch.rollouts.size();
  std::vector<double> rewards(n, 0.0);
  std::vector<bool> included(n, true);
  for (size_t i = 0; i < n; ++i) {
    const eval::Verdict& v = batch.rollouts[i].verdict;
    const bool internal = v.status == eval::VerdictStatus::kInternalError;
    rewards[i] = internal ? 0.0 : v.reward;
    included[i] = !internal;
  }
  ShapedRewards shaped;
  if (stage.kind == StageKind::kCrl) {
    shaped = shape_rewards(rewards, included, batch.group_size, normalizer);
  } else {
    shaped.normalized.assign(n, 0.0);
    shaped.advantages.assign(n, 0.0);
  }
  for (size_t i = 0; i < n; ++i) {
    RolloutRecord& r = batch.rollouts[i];
    r.reward = rewards[i];
    r.included = included[i];
    r.normalized = shaped.normalized[i];
    r.advantage = shaped.advantages[i];
    r.train = stage.kind == StageKind::kCrl ? included[i] : r.verdict.ok() && r.verdict.speedup >= stage.min_speedup;
  }
}

StepOutcome outcome_of(const StepBatch& batch, FailingEvaluationWatch& watch) {
  int64_t judged = 0, internal_errors = 0;
  std::string first_internal;
  StepOutcome outcome;
  for (const RolloutRecord& r : batch.rollouts) {
    const eval::Verdict& v = r.verdict;
    if (v.status != eval::VerdictStatus::kFormatError) ++judged;
    if (v.status == eval::VerdictStatus::kInternalError) {
      ++internal_errors;
      // Its message carries the judge's log: the start of it is the cause, the rest is in /text/logs.
      if (first_internal.empty()) first_internal = fmt::format("{} ({}): {}", v.candidate, v.task_id, v.message.substr(0, 1500));
    }
    outcome.advantages.push_back(r.advantage);
    outcome.train.push_back(r.train);
    outcome.train_rollouts += r.train ? 1 : 0;
  }
  outcome.evaluation_failed = watch.step(batch.plan.job_step, judged, internal_errors, first_internal);
  return outcome;
}

std::vector<RolloutRow> rollout_rows_of(const StepBatch& batch, const std::string& stage_name, const std::string& scale,
                                        int64_t restart) {
  std::vector<RolloutRow> rows;
  for (const RolloutRecord& rollout : batch.rollouts) {
    const eval::Verdict& v = rollout.verdict;
    RolloutRow r;
    r.rollout_id = rollout.id;
    r.step = batch.plan.job_step;
    r.stage = stage_name;
    r.task = rollout.task;
    r.group = rollout.group;
    r.sample = rollout.sample;
    r.status = v.status_text();
    r.speedup = v.speedup;
    r.speedup_ci_low = v.speedup_ci_low;
    r.speedup_ci_high = v.speedup_ci_high;
    r.speedup_ci_half_width = std::isfinite(v.speedup_ci_half_width()) ? v.speedup_ci_half_width() : 0.0;
    r.candidate_median_us = v.candidate_time.median_us;
    r.reference_median_us = v.reference_time.median_us;
    r.scale = v.scale.empty() ? scale : v.scale;
    r.reward = rollout.reward;
    r.normalized_reward = rollout.normalized;
    r.advantage = rollout.advantage;
    r.completion_tokens = rollout.completion_tokens;
    r.evaluator_rank = rollout.evaluator_rank;
    r.exemplar_ids = batch.plan.groups[static_cast<size_t>(rollout.group)].exemplar_ids;
    r.policy_version = batch.policy_version;
    r.restart = restart;
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {

void count_status(StepRow& row, eval::VerdictStatus status) {
  switch (status) {
    case eval::VerdictStatus::kOk: ++row.n_ok; break;
    case eval::VerdictStatus::kCompileError: ++row.n_compile_error; break;
    case eval::VerdictStatus::kRuntimeError: ++row.n_runtime_error; break;
    case eval::VerdictStatus::kTimeout: ++row.n_timeout; break;
    case eval::VerdictStatus::kCrash: ++row.n_crash; break;
    case eval::VerdictStatus::kMismatch: ++row.n_mismatch; break;
    case eval::VerdictStatus::kHack: ++row.n_hack; break;
    case eval::VerdictStatus::kFormatError: ++row.n_format_error; break;
    case eval::VerdictStatus::kInternalError: ++row.n_internal_error; break;
  }
}

}  // namespace

namespace {

// Mean and longest completion of the step's rollouts, in tokens.
void add_completion_lengths(StepRow& row, const StepBatch& batch) {
  if (batch.rollouts.empty()) return;
  double sum = 0, longest = 0;
  for (const RolloutRecord& r : batch.rollouts) {
    sum += static_cast<double>(r.completion_tokens);
    longest = std::max(longest, static_cast<double>(r.completion_tokens));
  }
  row.completion_tokens_mean = sum / static_cast<double>(batch.rollouts.size());
  row.completion_tokens_max = longest;
}

// GRPO's advantages over the counted rollouts (mean, std without Bessel's correction), and the share
// of groups that teach nothing: their counted rewards are all equal (or fewer than two are counted),
// so every advantage in them is 0.
void add_advantage_stats(StepRow& row, const StepBatch& batch) {
  std::vector<double> advantages;
  const int64_t group_size = batch.group_size;
  if (group_size <= 0 || batch.rollouts.empty()) return;
  const int64_t groups = static_cast<int64_t>(batch.rollouts.size()) / group_size;
  int64_t flat = 0;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> rewards;
    for (int64_t k = 0; k < group_size; ++k) {
      const RolloutRecord& r = batch.rollouts[static_cast<size_t>(g * group_size + k)];
      if (!r.included) continue;
      rewards.push_back(r.reward);
      advantages.push_back(r.advantage);
    }
    const bool all_equal = rewards.size() < 2 || std::all_of(rewards.begin(), rewards.end(),
                                                             [&](double x) { return x == rewards.front(); });
    if (all_equal) ++flat;
  }
  if (groups > 0) row.zero_advantage_fraction = static_cast<double>(flat) / static_cast<double>(groups);
  if (advantages.empty()) return;
  const double mean = std::accumulate(advantages.begin(), advantages.end(), 0.0) / static_cast<double>(advantages.size());
  double squares = 0;
  for (double a : advantages) squares += (a - mean) * (a - mean);
  row.advantage_mean = mean;
  row.advantage_std = std::sqrt(squares / static_cast<double>(advantages.size()));
}

}  // namespace

StepRow step_row_of(const StepBatch& batch, const UpdateStats& update, const std::string& stage_name, int evaluators,
                    int64_t restart) {
  StepRow row;
  std::vector<double> counted;
  for (const RolloutRecord& r : batch.rollouts) {
    count_status(row, r.verdict.status);
    if (r.included) counted.push_back(r.reward);
  }
  if (!counted.empty()) {
    std::sort(counted.begin(), counted.end());
    row.reward_mean = std::accumulate(counted.begin(), counted.end(), 0.0) / static_cast<double>(counted.size());
    row.reward_median = median(counted);
    row.reward_max = counted.back();
  }
  const StepTimings& t = batch.timings;
  row.seconds_evaluate = t.seconds_evaluate;
  row.evaluator_busy_fraction =
      t.seconds_evaluate > 0 && evaluators > 0 ? t.evaluator_busy_seconds / (t.seconds_evaluate * evaluators) : 0;
  row.step = batch.plan.job_step;
  row.stage = stage_name;
  row.policy_version = batch.policy_version;
  row.loss = update.loss;
  row.grad_norm = update.grad_norm;
  row.lr = update.lr;
  row.skipped = update.skipped;
  row.tokens_generated = static_cast<int64_t>(t.tokens_generated);
  row.tokens_trained = update.tokens_trained;
  row.seconds_generate = t.seconds_generate;
  row.seconds_train = t.seconds_train;
  row.trainer_wait_seconds = t.trainer_wait_seconds;
  row.restart = restart;
  row.entropy = update.entropy;
  row.kl = update.kl;
  row.clip_fraction = update.clip_fraction;
  add_completion_lengths(row, batch);
  if (stage_name == stage_kind_name(StageKind::kCrl)) add_advantage_stats(row, batch);
  return row;
}

std::vector<StepText> texts_of(const StepBatch& batch, const std::string& store_prefix) {
  std::vector<StepText> texts;
  for (const RolloutRecord& r : batch.rollouts) {
    const eval::Verdict& v = r.verdict;
    texts.push_back({store_prefix + "prompts", r.id, batch.plan.groups[static_cast<size_t>(r.group)].prompt});
    texts.push_back({store_prefix + "completions", r.id, r.completion});
    if (!r.program.empty()) texts.push_back({store_prefix + "programs", r.id, r.program});
    std::string log = v.message;
    for (const auto& s : v.steps) {
      if (s.name == "judge") log += "\n--- judge\n" + s.detail;  // its secret replays the task's inputs
    }
    if (!v.compile_log.empty()) log += "\n--- compile log\n" + v.compile_log;
    if (!v.worker_log.empty()) log += "\n--- worker log\n" + v.worker_log;
    texts.push_back({store_prefix + "logs", r.id, std::move(log)});
  }
  return texts;
}

std::vector<Exemplar> exemplars_of(const StepBatch& batch) {
  std::vector<Exemplar> out;
  for (const RolloutRecord& r : batch.rollouts) {
    const eval::Verdict& v = r.verdict;
    if (v.ok() && std::isfinite(v.speedup) && v.speedup > 0) {
      out.push_back({r.id, batch.plan.job_step, r.task, r.program,
                     v.speedup, parse_ids(batch.plan.groups[static_cast<size_t>(r.group)].exemplar_ids, "plan")});
    }
  }
  return out;
}

// ---- messages ----

void to_json(nlohmann::json& j, const PlannedGroup& g) {
  j = {{"task", g.task}, {"prompt", g.prompt}, {"exemplar_ids", g.exemplar_ids}};
}
void from_json(const nlohmann::json& j, PlannedGroup& g) {
  g.task = j.at("task").get<std::string>();
  g.prompt = j.at("prompt").get<std::string>();
  g.exemplar_ids = j.at("exemplar_ids").get<std::string>();
}
void to_json(nlohmann::json& j, const StepOutcome& o) {
  j = {{"advantages", o.advantages}, {"train", o.train}, {"train_rollouts", o.train_rollouts},
       {"evaluation_failed", o.evaluation_failed}};
}
void from_json(const nlohmann::json& j, StepOutcome& o) {
  o.advantages = j.at("advantages").get<std::vector<double>>();
  o.train = j.at("train").get<std::vector<bool>>();
  o.train_rollouts = j.at("train_rollouts").get<int64_t>();
  o.evaluation_failed = j.at("evaluation_failed").get<std::string>();
  if (o.train.size() != o.advantages.size()) throw InputError("a step outcome's train and advantages differ in length");
}
void to_json(nlohmann::json& j, const CompletionMessage& m) {
  j = {{"group", m.group}, {"sample", m.sample}, {"text", m.text}, {"tokens", m.tokens}};
}
void from_json(const nlohmann::json& j, CompletionMessage& m) {
  m.group = j.at("group").get<int64_t>();
  m.sample = j.at("sample").get<int64_t>();
  m.text = j.at("text").get<std::string>();
  m.tokens = j.at("tokens").get<int64_t>();
}

}  // namespace crl::rl
