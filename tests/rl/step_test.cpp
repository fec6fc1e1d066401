// The MPI-free stages of a generating step (rl/step.h), one at a time on hand-made records: the
// plan (tasks, exemplars, prompts), the records from the trainers' completions, program
// extraction, judging (through a stand-in judge and verdict reuse), rewards, the outcome, and the
// rows and texts the step records.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/read_file.h"
#include "rl/prompt.h"
#include "rl/step.h"

namespace crl::rl {
namespace {

std::vector<Task> make_tasks(const std::vector<std::string>& ids) {
  std::vector<Task> tasks;
  for (const std::string& id : ids) {
    Task t;
    t.id = id;
    tasks.push_back(t);
  }
  return tasks;
}

std::vector<const Task*> pointers(const std::vector<Task>& tasks) {
  std::vector<const Task*> out;
  for (const Task& t : tasks) out.push_back(&t);
  return out;
}

// A prompt that says which task and exemplars it was rendered from.
std::string render(const Task& task, const std::vector<PromptExemplar>& shown) {
  std::string text = "prompt for " + task.id;
  for (const PromptExemplar& e : shown) text += " | " + e.program;
  return text;
}

StageConfig crl_stage(int64_t batch, int64_t group) {
  StageConfig s;
  s.kind = StageKind::kCrl;
  s.batch = batch;
  s.group = group;
  s.exemplars = 2;
  return s;
}

TEST(PlanStep, DrawsEachTaskOnceWhileTheListAllowsAndRepeatsForTheSameSeedAndStep) {
  const std::vector<Task> tasks = make_tasks({"a", "b", "c"});
  const ExemplarDatabase none;
  const StepPlan plan = plan_step(crl_stage(5, 2), pointers(tasks), none, 7, 3, render);
  EXPECT_EQ(plan.job_step, 3);
  ASSERT_EQ(plan.groups.size(), 5u);
  const std::set<std::string> first_round = {plan.groups[0].task, plan.groups[1].task, plan.groups[2].task};
  EXPECT_EQ(first_round.size(), 3u) << "a task repeated before every task was drawn";
  for (const PlannedGroup& g : plan.groups) {
    EXPECT_EQ(g.prompt, "prompt for " + g.task);
    EXPECT_EQ(g.exemplar_ids, "");  // an empty database shows none
  }
  const StepPlan again = plan_step(crl_stage(5, 2), pointers(tasks), none, 7, 3, render);
  for (size_t i = 0; i < plan.groups.size(); ++i) EXPECT_EQ(again.groups[i].task, plan.groups[i].task);
  // The draw is draw_tasks' (seeds.h's task_draw_seed of the job's seed and step).
  const std::vector<const Task*> drawn = draw_tasks(pointers(tasks), 5, 7, 3);
  for (size_t i = 0; i < plan.groups.size(); ++i) EXPECT_EQ(plan.groups[i].task, drawn[i]->id);
}

TEST(PlanStep, CrlPromptsShowExemplarsOfTheirTaskAndSelftrainNone) {
  const std::vector<Task> tasks = make_tasks({"a"});
  ExemplarDatabase db;
  db.add({11, 0, "a", "program eleven", 1.5, {}});
  db.add({12, 0, "a", "program twelve", 3.0, {}});
  db.add({13, 0, "b", "program of b", 2.0, {}});
  const StepPlan plan = plan_step(crl_stage(1, 2), pointers(tasks), db, 1, 0, render);
  ASSERT_EQ(plan.groups.size(), 1u);
  const std::vector<int64_t> shown = parse_ids(plan.groups[0].exemplar_ids, "test");
  EXPECT_EQ(std::set<int64_t>(shown.begin(), shown.end()), (std::set<int64_t>{11, 12}));
  EXPECT_NE(plan.groups[0].prompt.find("program eleven"), std::string::npos) << plan.groups[0].prompt;
  EXPECT_EQ(plan.groups[0].prompt.find("program of b"), std::string::npos);

  StageConfig selftrain = crl_stage(1, 2);
  selftrain.kind = StageKind::kSelftrain;
  const StepPlan plain = plan_step(selftrain, pointers(tasks), db, 1, 0, render);
  EXPECT_EQ(plain.groups[0].exemplar_ids, "");
  EXPECT_EQ(plain.groups[0].prompt, "prompt for a");
}

StepPlan two_group_plan() { return {4, {{"a", "prompt a", "7"}, {"b", "prompt b", ""}}}; }

TEST(RecordsFrom, NumbersRolloutsByIndexFromTheFirstIdWhateverTheTrainerOrder) {
  // Trainer 0 has group 0, trainer 1 group 1 (G = 2); trainer 1's arrive in reverse order.
  const std::vector<std::vector<CompletionMessage>> per_trainer = {{{0, 0, "t00", 3}, {0, 1, "t01", 4}},
                                                                   {{1, 1, "t11", 6}, {1, 0, "t10", 5}}};
  const std::vector<RolloutRecord> records = records_from(two_group_plan(), 2, per_trainer, 100);
  ASSERT_EQ(records.size(), 4u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].id, 100 + static_cast<int64_t>(i));
    EXPECT_EQ(records[i].group * 2 + records[i].sample, static_cast<int64_t>(i));
  }
  EXPECT_EQ(records[2].completion, "t10");
  EXPECT_EQ(records[2].completion_tokens, 5);
  EXPECT_EQ(records[2].task, "b");
  EXPECT_EQ(records[1].task, "a");
}

TEST(RecordsFrom, RefusesAnIndexOutsideThePlanATwiceSentOrAMissingRollout) {
  EXPECT_THROW(records_from(two_group_plan(), 2, {{{2, 0, "x", 1}}}, 0), Error);
  EXPECT_THROW(records_from(two_group_plan(), 2, {{{0, 2, "x", 1}}}, 0), Error);
  const std::vector<CompletionMessage> all = {{0, 0, "", 1}, {0, 1, "", 1}, {1, 0, "", 1}, {1, 1, "", 1}};
  EXPECT_NO_THROW(records_from(two_group_plan(), 2, {all}, 0));
  EXPECT_THROW(records_from(two_group_plan(), 2, {all, {{1, 1, "", 1}}}, 0), Error);
  EXPECT_THROW(records_from(two_group_plan(), 2, {{all[0], all[1], all[2]}}, 0), Error);
}

// A batch of 2 groups of 2 whose records have the verdicts given (status, reward, speedup).
StepBatch judged_batch(const std::vector<std::tuple<eval::VerdictStatus, double, double>>& verdicts) {
  StepBatch batch;
  batch.plan = two_group_plan();
  batch.group_size = 2;
  batch.policy_version = 9;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    RolloutRecord r;
    r.id = 50 + static_cast<int64_t>(i);
    r.group = static_cast<int64_t>(i) / 2;
    r.sample = static_cast<int64_t>(i) % 2;
    r.task = batch.plan.groups[static_cast<size_t>(r.group)].task;
    r.verdict.task_id = r.task;
    r.verdict.status = std::get<0>(verdicts[i]);
    r.verdict.reward = std::get<1>(verdicts[i]);
    r.verdict.speedup = std::get<2>(verdicts[i]);
    batch.rollouts.push_back(r);
  }
  return batch;
}

using S = eval::VerdictStatus;

std::string relu_program() { return read_input_file(std::string(CRL_TEST_DATA_DIR) + "/eval/relu/same_as_reference.crl", "test"); }

TEST(ExtractPrograms, AProgramBlockGoesOnAndAnythingElseIsAFormatProblem) {
  StepBatch batch = judged_batch({{S::kOk, 0, 0}, {S::kOk, 0, 0}});
  batch.rollouts[0].completion = completion_from_program(relu_program());
  batch.rollouts[1].completion = "no code here";
  extract_programs(batch);
  EXPECT_TRUE(batch.rollouts[0].has_program) << batch.rollouts[0].format_problem;
  EXPECT_NE(batch.rollouts[0].program.find("crl:"), std::string::npos);
  EXPECT_FALSE(batch.rollouts[1].has_program);
  EXPECT_TRUE(batch.rollouts[1].program.empty());
  EXPECT_FALSE(batch.rollouts[1].format_problem.empty());
}

TEST(JudgePrograms, OnlyProgramsGoToTheJudgeAndTheRestGetFormatError) {
  StepBatch batch = judged_batch({{S::kOk, 0, 0}, {S::kOk, 0, 0}, {S::kOk, 0, 0}});
  for (RolloutRecord& r : batch.rollouts) r.has_program = true;
  batch.rollouts[1].has_program = false;
  batch.rollouts[1].format_problem = "no fenced block";
  batch.rollouts[0].program = batch.rollouts[2].program = "p";
  std::vector<int64_t> asked;
  const VerdictReuse::Judge judge = [&](const std::vector<WorkItem>& work) {
    std::map<int64_t, DispatchedVerdict> out;
    for (const WorkItem& w : work) {
      asked.push_back(w.work_id);
      EXPECT_EQ(w.name, "rollout " + std::to_string(w.work_id));
      eval::Verdict v;
      v.task_id = w.task;
      v.status = S::kMismatch;
      out[w.work_id] = {v, 3, 0.5};
    }
    return out;
  };
  judge_programs(batch, judge, nullptr);
  EXPECT_EQ(asked, (std::vector<int64_t>{50, 52}));
  EXPECT_EQ(batch.rollouts[0].verdict.status, S::kMismatch);
  EXPECT_EQ(batch.rollouts[0].evaluator_rank, 3);
  EXPECT_EQ(batch.rollouts[1].verdict.status, S::kFormatError);
  EXPECT_EQ(batch.rollouts[1].verdict.message, "no fenced block");
  EXPECT_EQ(batch.rollouts[1].verdict.candidate, "rollout 51");
  EXPECT_EQ(batch.rollouts[1].evaluator_rank, -1);
  EXPECT_DOUBLE_EQ(batch.timings.evaluator_busy_seconds, 1.0);
  EXPECT_GE(batch.timings.seconds_evaluate, 0.0);

  // Through verdict reuse, the same program of the same task is judged once in a step.
  StepBatch twice = judged_batch({{S::kOk, 0, 0}, {S::kOk, 0, 0}});
  for (RolloutRecord& r : twice.rollouts) {
    r.has_program = true;
    r.program = "same";
  }
  asked.clear();
  VerdictReuse reuse;
  judge_programs(twice, judge, &reuse);
  EXPECT_EQ(asked.size(), 1u);
  EXPECT_EQ(twice.rollouts[1].verdict.status, S::kMismatch);
}

TEST(AssignRewards, CrlShapesCountedRewardsAndLeavesInternalErrorsOut) {
  StepBatch batch = judged_batch({{S::kOk, 1.5, 1.5}, {S::kCrash, 0, 0}, {S::kInternalError, 0.7, 0}, {S::kOk, 2.0, 2.0}});
  StageConfig stage = crl_stage(2, 2);
  RewardNormalizer normalizer(100, 1.5);
  assign_rewards(batch, normalizer, stage);
  const RolloutRecord& internal = batch.rollouts[2];
  EXPECT_EQ(internal.reward, 0.0);
  EXPECT_FALSE(internal.included);
  EXPECT_FALSE(internal.train);
  EXPECT_EQ(internal.advantage, 0.0);
  // The others: shape_rewards' values on the same inputs, and all of them train.
  RewardNormalizer direct(100, 1.5);
  const ShapedRewards expected = shape_rewards({1.5, 0, 0, 2.0}, {true, true, false, true}, 2, direct);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(batch.rollouts[i].normalized, expected.normalized[i]) << i;
    EXPECT_EQ(batch.rollouts[i].advantage, expected.advantages[i]) << i;
    EXPECT_EQ(batch.rollouts[i].train, i != 2) << i;
  }
  EXPECT_GT(batch.rollouts[0].advantage, batch.rollouts[1].advantage);
  EXPECT_EQ(normalizer.size(), 3u);  // the internal error's reward did not enter the window
}

TEST(AssignRewards, SelftrainTrainsOnCorrectProgramsAtLeastMinSpeedupFast) {
  StepBatch batch = judged_batch({{S::kOk, 1.0, 0.8}, {S::kOk, 1.2, 1.2}, {S::kMismatch, 0, 0}, {S::kOk, 1.0, 1.0}});
  StageConfig stage = crl_stage(2, 2);
  stage.kind = StageKind::kSelftrain;
  stage.min_speedup = 1.0;
  RewardNormalizer normalizer(100, 1.5);
  assign_rewards(batch, normalizer, stage);
  EXPECT_EQ(normalizer.size(), 0u);  // no shaping outside crl
  const std::vector<bool> train = {false, true, false, true};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(batch.rollouts[i].train, train[i]) << i;
    EXPECT_EQ(batch.rollouts[i].advantage, 0.0);
    EXPECT_EQ(batch.rollouts[i].normalized, 0.0);
  }
  EXPECT_EQ(batch.rollouts[1].reward, 1.2);
}

TEST(OutcomeOf, CarriesTheUpdatesInputsAndStopsWhenEvaluationFailsForEverything) {
  StepBatch batch = judged_batch({{S::kOk, 1, 1}, {S::kFormatError, 0, 0}});
  batch.rollouts[0].advantage = 0.25;
  batch.rollouts[0].train = true;
  FailingEvaluationWatch never(0);
  StepOutcome outcome = outcome_of(batch, never);
  EXPECT_EQ(outcome.advantages, (std::vector<double>{0.25, 0.0}));
  EXPECT_EQ(outcome.train, (std::vector<bool>{true, false}));
  EXPECT_EQ(outcome.train_rollouts, 1);
  EXPECT_EQ(outcome.evaluation_failed, "");

  StepBatch failing = judged_batch({{S::kInternalError, 0, 0}, {S::kFormatError, 0, 0}});
  failing.rollouts[0].verdict.message = "the judge broke";
  FailingEvaluationWatch once(1);
  const StepOutcome stop = outcome_of(failing, once);
  EXPECT_NE(stop.evaluation_failed.find("the judge broke"), std::string::npos) << stop.evaluation_failed;
  // A step with no judged program (format errors only) says nothing about evaluation.
  FailingEvaluationWatch once_more(1);
  EXPECT_EQ(outcome_of(judged_batch({{S::kFormatError, 0, 0}}), once_more).evaluation_failed, "");
}

TEST(StepMessages, RoundTripAndMissingFieldsAreErrors) {
  StepOutcome o{{0.5, -1.25}, {true, false}, 1, "stop"};
  const StepOutcome back = nlohmann::json(o).get<StepOutcome>();
  EXPECT_EQ(back.advantages, o.advantages);
  EXPECT_EQ(back.train, o.train);
  EXPECT_EQ(back.train_rollouts, 1);
  EXPECT_EQ(back.evaluation_failed, "stop");
  nlohmann::json missing = nlohmann::json(o);
  missing.erase("train");
  EXPECT_THROW(missing.get<StepOutcome>(), nlohmann::json::exception);
  nlohmann::json uneven = nlohmann::json(o);
  uneven["train"].push_back(true);
  EXPECT_THROW(uneven.get<StepOutcome>(), InputError);
  const PlannedGroup g = nlohmann::json(PlannedGroup{"t", "p", "1,2"}).get<PlannedGroup>();
  EXPECT_EQ(g.exemplar_ids, "1,2");
  const CompletionMessage m = nlohmann::json(CompletionMessage{1, 2, "text", 3}).get<CompletionMessage>();
  EXPECT_EQ(m.sample, 2);
  EXPECT_EQ(m.tokens, 3);
  EXPECT_THROW((nlohmann::json{{"group", 1}, {"sample", 2}, {"text", "x"}}.get<CompletionMessage>()), nlohmann::json::exception);
}

TEST(RecordedRows, RolloutRowsCarryEachRecordAndItsPlan) {
  StepBatch batch = judged_batch({{S::kOk, 1.5, 1.51}, {S::kHack, 0, 0}, {S::kFormatError, 0, 0}, {S::kOk, 1, 1}});
  batch.rollouts[0].verdict.scale = "full";
  batch.rollouts[0].verdict.candidate_time.median_us = 10;
  batch.rollouts[0].verdict.reference_time.median_us = 15;
  batch.rollouts[0].verdict.speedup_ci_low = 1.4;
  batch.rollouts[0].verdict.speedup_ci_high = 1.6;
  batch.rollouts[0].reward = 1.5;
  batch.rollouts[0].normalized = 0.7;
  batch.rollouts[0].advantage = 0.3;
  batch.rollouts[0].completion_tokens = 42;
  batch.rollouts[0].evaluator_rank = 3;
  batch.rollouts[1].verdict.hack_kind = "output_cache";
  const std::vector<RolloutRow> rows = rollout_rows_of(batch, "crl", "small", 2);
  ASSERT_EQ(rows.size(), 4u);
  const RolloutRow& r = rows[0];
  EXPECT_EQ(r.rollout_id, 50);
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.stage, "crl");
  EXPECT_EQ(r.task, "a");
  EXPECT_EQ(r.status, "ok");
  EXPECT_EQ(r.speedup, 1.51);
  EXPECT_NEAR(r.speedup_ci_half_width, 0.1 / 1.51, 1e-12);  // the width reported with every reward
  EXPECT_EQ(rows[1].speedup_ci_half_width, 0);              // not timed
  EXPECT_EQ(r.candidate_median_us, 10);
  EXPECT_EQ(r.reference_median_us, 15);
  EXPECT_EQ(r.scale, "full");
  EXPECT_EQ(r.reward, 1.5);
  EXPECT_EQ(r.normalized_reward, 0.7);
  EXPECT_EQ(r.advantage, 0.3);
  EXPECT_EQ(r.completion_tokens, 42);
  EXPECT_EQ(r.evaluator_rank, 3);
  EXPECT_EQ(r.exemplar_ids, "7");
  EXPECT_EQ(r.policy_version, 9);
  EXPECT_EQ(r.restart, 2);
  EXPECT_EQ(rows[1].status, "hack:output_cache");
  EXPECT_EQ(rows[2].scale, "small");  // a verdict that names no scale: the job's
  EXPECT_EQ(rows[3].group, 1);
  EXPECT_EQ(rows[3].sample, 1);
  EXPECT_EQ(rows[3].exemplar_ids, "");
}

TEST(RecordedRows, StepRowCountsStatusesAndRewardsOfCountedRollouts) {
  StepBatch batch = judged_batch({{S::kOk, 0, 0}, {S::kInternalError, 0, 0}, {S::kFormatError, 0, 0}, {S::kOk, 0, 0}});
  const std::vector<double> rewards = {2.0, 0.0, 0.0, 1.0};
  for (size_t i = 0; i < 4; ++i) batch.rollouts[i].reward = rewards[i];
  batch.rollouts[1].included = false;
  batch.timings = {120, 2.5, 4.0, 6.0, 0.5, 1.5};
  UpdateStats update{0.25, 1.5, 1e-4, 77, false};
  const StepRow row = step_row_of(batch, update, "crl", 2, 1);
  EXPECT_EQ(row.n_ok, 2);
  EXPECT_EQ(row.n_internal_error, 1);
  EXPECT_EQ(row.n_format_error, 1);
  EXPECT_DOUBLE_EQ(row.reward_mean, 1.0);  // (2 + 0 + 1) / 3: the internal error is not counted
  EXPECT_DOUBLE_EQ(row.reward_median, 1.0);
  EXPECT_DOUBLE_EQ(row.reward_max, 2.0);
  EXPECT_DOUBLE_EQ(row.evaluator_busy_fraction, 6.0 / (4.0 * 2));
  EXPECT_EQ(row.tokens_generated, 120);
  EXPECT_EQ(row.tokens_trained, 77);
  EXPECT_EQ(row.loss, 0.25);
  EXPECT_FALSE(row.skipped);
  EXPECT_EQ(row.step, 4);
  EXPECT_EQ(row.policy_version, 9);
  EXPECT_EQ(row.seconds_generate, 2.5);
  EXPECT_EQ(row.seconds_train, 1.5);
  EXPECT_EQ(row.trainer_wait_seconds, 0.5);
  EXPECT_EQ(row.restart, 1);
}

TEST(RecordedRows, StepRowTelemetryLengthsAdvantagesAndZeroAdvantageGroups) {
  // Group 0: rewards 2 and 1 (it teaches); group 1: an internal error left out and a 0: fewer than
  // two counted rewards, a group that teaches nothing.
  StepBatch batch = judged_batch({{S::kOk, 0, 0}, {S::kOk, 0, 0}, {S::kInternalError, 0, 0}, {S::kFormatError, 0, 0}});
  const std::vector<double> rewards = {2.0, 1.0, 0.0, 0.0}, advantages = {0.7, -0.7, 0.0, 0.0};
  const std::vector<int64_t> lengths = {10, 30, 5, 15};
  for (size_t i = 0; i < 4; ++i) {
    batch.rollouts[i].reward = rewards[i];
    batch.rollouts[i].advantage = advantages[i];
    batch.rollouts[i].completion_tokens = lengths[i];
  }
  batch.rollouts[2].included = false;
  UpdateStats update{0.25, 1.5, 1e-4, 77, false};
  update.entropy = 2.5;
  update.clip_fraction = 0.125;
  const StepRow row = step_row_of(batch, update, "crl", 2, 1);
  EXPECT_DOUBLE_EQ(row.completion_tokens_mean, 15.0);
  EXPECT_DOUBLE_EQ(row.completion_tokens_max, 30.0);
  EXPECT_DOUBLE_EQ(row.zero_advantage_fraction, 0.5);
  // Over the counted rollouts 0.7, -0.7, 0: mean 0, population std sqrt(0.98 / 3).
  EXPECT_NEAR(row.advantage_mean, 0.0, 1e-12);
  EXPECT_NEAR(row.advantage_std, std::sqrt(0.98 / 3), 1e-12);
  EXPECT_DOUBLE_EQ(row.entropy, 2.5);
  EXPECT_DOUBLE_EQ(row.clip_fraction, 0.125);
  EXPECT_TRUE(std::isnan(row.kl)) << "no KL reference: not measured";

  // selftrain has no advantages: those columns are not measured; lengths are.
  const StepRow selftrain = step_row_of(batch, UpdateStats{}, "selftrain", 2, 1);
  EXPECT_TRUE(std::isnan(selftrain.advantage_mean));
  EXPECT_TRUE(std::isnan(selftrain.zero_advantage_fraction));
  EXPECT_TRUE(std::isnan(selftrain.entropy)) << "no update";
  EXPECT_DOUBLE_EQ(selftrain.completion_tokens_max, 30.0);

  // Every group's counted rewards equal: all of them teach nothing.
  for (auto& r : batch.rollouts) r.reward = 1.0, r.included = true;
  EXPECT_DOUBLE_EQ(step_row_of(batch, update, "crl", 2, 1).zero_advantage_fraction, 1.0);
}

TEST(RecordedRows, TextsPerRolloutAndLogsWithTheJudgeStepAndExemplarsOfCorrectPrograms) {
  StepBatch batch = judged_batch({{S::kOk, 1.5, 1.5}, {S::kFormatError, 0, 0}, {S::kOk, 0, 0}, {S::kMismatch, 0, 0}});
  for (RolloutRecord& r : batch.rollouts) r.completion = "completion " + std::to_string(r.id);
  batch.rollouts[0].program = "program 50";
  batch.rollouts[2].program = "program 52";
  batch.rollouts[0].verdict.message = "1.50x";
  batch.rollouts[0].verdict.steps = {{"compile", true, "compiled", 0}, {"judge", true, "inputs from secret 99", 0}};
  batch.rollouts[0].verdict.compile_log = "nvcc said";
  const std::vector<StepText> texts = texts_of(batch);
  std::vector<std::string> stores;
  for (const StepText& t : texts) {
    if (t.id == 50) stores.push_back(t.store);
  }
  EXPECT_EQ(stores, (std::vector<std::string>{"prompts", "completions", "programs", "logs"}));
  EXPECT_EQ(std::count_if(texts.begin(), texts.end(), [](const StepText& t) { return std::string(t.store) == "programs"; }), 2);
  const auto log = std::find_if(texts.begin(), texts.end(), [](const StepText& t) { return t.id == 50 && std::string(t.store) == "logs"; });
  EXPECT_EQ(log->text, "1.50x\n--- judge\ninputs from secret 99\n--- compile log\nnvcc said");
  EXPECT_EQ(texts[0].text, "prompt a");

  // Exemplars: ok with a measured speedup only (rollout 52 is ok but untimed), with the ids its prompt showed.
  const std::vector<Exemplar> added = exemplars_of(batch);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].rollout_id, 50);
  EXPECT_EQ(added[0].step, 4);
  EXPECT_EQ(added[0].program, "program 50");
  EXPECT_EQ(added[0].speedup, 1.5);
  EXPECT_EQ(added[0].shown_exemplars, (std::vector<int64_t>{7}));
}

}  // namespace
}  // namespace crl::rl
