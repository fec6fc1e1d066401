// The evaluation pipeline driven through a scripted crl-worker (scripted_worker.cpp): every way a
// judge or a program worker can answer ends in the status the stages decide, the checks come in
// their order, and the secret's draws reach the judge in the order `crl eval --seed` replays.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "eval/evaluator.h"
#include "eval/scratch_dir.h"
#include "program/value_mix.h"
#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::explain;

class PipelineTest : public ::testing::Test {
 protected:
  // Judges the ReLU fixture's reference as the candidate against a scripted judge and worker.
  Verdict judge(const nlohmann::json& script, int trials = 2) {
    const std::string script_path = dir_.file("script.json");
    std::ofstream(script_path) << script.dump();
    const std::string wrapper = dir_.file("worker.sh");
    std::ofstream(wrapper) << "#!/bin/sh\nexec " << SCRIPTED_WORKER << " --script " << script_path << " \"$@\"\n";
    chmod(wrapper.c_str(), 0755);
    EvalOptions o = testing::quick_options(Backend::cpu);
    o.worker_executable = wrapper;
    o.sandbox = false;
    o.trials = trials;
    o.seed = 7;
    o.time_budget_seconds = 0;
    o.min_timed_pairs = 2;
    o.pairs_per_round = 2;
    o.remeasure_above_speedup = 1e12;  // the scripted programs' times are noise
    o.max_slots = 3;
    o.call_timeout_seconds = 5;
    Evaluator evaluator(o, testing::fixture_compiler());
    const Task& task = testing::fixture_suite().find("level1/019_relu");
    return evaluator.evaluate(task, task.program, "scripted");
  }
  // The requests the scripted workers got, in order: {role, op[, seeds]}.
  std::vector<nlohmann::json> requests() {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_.file("script.json.log"));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  static std::string failed_step(const Verdict& v) { return v.first_failed_step() ? v.first_failed_step()->name : "(none)"; }

  ScratchDir dir_{"crl-pipeline-test-"};
};

TEST_F(PipelineTest, AnHonestRunIsOkWithEveryStageInOrder) {
  const Verdict v = judge(nlohmann::json::object());
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  EXPECT_EQ(v.secret, 7u);
  std::vector<std::string> names;
  for (const auto& s : v.steps) names.push_back(s.name);
  const std::vector<std::string> expected = {"judge", "compile", "guard: symbols", "static scan (report only)", "load", "trial 1",
                                             "trial 2", "guard: aliasing", "guard: first call, free memory poisoned",
                                             "guard: timed outputs", "timing"};
  EXPECT_EQ(names, expected) << explain(v);
  EXPECT_EQ(v.trials_passed, 2);
  EXPECT_EQ(v.reference_time.samples, 2);
}

TEST_F(PipelineTest, TheSecretsDrawsReachTheJudgeInTheirReplayOrder) {
  ASSERT_EQ(judge(nlohmann::json::object()).status, VerdictStatus::kOk);
  std::vector<uint64_t> filled;  // every seed the judge was asked to fill, in order
  for (const auto& r : requests()) {
    if (r["op"] != "fill") continue;
    for (const auto& slot : r["seeds"]) filled.push_back(slot["seed"].get<uint64_t>());
  }
  const std::string task = "level1/019_relu";
  std::vector<uint64_t> expected = trial_seeds(7, 2, task);  // the trials' fills first
  SecretDraws draws(7, task);
  for (const uint64_t s : draw_warmup(draws, 3)) expected.push_back(s);  // then the warm-up batch
  for (int pair = 0; pair < 2; ++pair) {                                   // then each pair's slots
    for (const uint64_t s : draw_pair(draws, 3).seeds) expected.push_back(s);
  }
  EXPECT_EQ(filled, expected);
}

// The judge decides the value mix before it runs the reference on any trial, every reference output
// a candidate's is compared with is held with its float64 reference (the trials' and each checked
// slot's), and the candidate's worker loads with the judge's mix (its guards make the trials' inputs).
TEST_F(PipelineTest, TheJudgeDecidesTheValueMixFirstAndHoldsEveryComparedOutputInFloat64) {
  ASSERT_EQ(judge(nlohmann::json::object()).status, VerdictStatus::kOk);
  std::vector<std::string> judge_ops;
  int reference_runs = 0, slot_runs = 0;
  nlohmann::json candidate_mix;
  for (const auto& r : requests()) {
    if (r["role"] == "judge") judge_ops.push_back(r["op"]);
    if (r["op"] == "reference") {
      ++reference_runs;
      EXPECT_EQ(r["float64"], true) << r.dump();
    }
    if (r["op"] == "reference_slot") {
      ++slot_runs;
      EXPECT_EQ(r["float64"], true) << r.dump();
    }
    if (r["role"] == "program" && r["op"] == "load") candidate_mix = r["value_mix"];
  }
  ASSERT_GE(judge_ops.size(), 3u);
  EXPECT_EQ(judge_ops[0], "load");
  EXPECT_EQ(judge_ops[1], "values");
  EXPECT_EQ(judge_ops[2], "reference");
  EXPECT_EQ(reference_runs, 2);  // the two trials
  EXPECT_EQ(slot_runs, 2);       // one checked slot per timed pair
  EXPECT_EQ(candidate_mix, nlohmann::json::array({kMixMagnitudes})) << "the scripted judge kept magnitudes";
}

TEST_F(PipelineTest, OutputsTheJudgeFindsWrongAreAMismatchNamingTheTrialAndSeed) {
  const Verdict v = judge({{"compare", "mismatch"}});
  EXPECT_EQ(v.status, VerdictStatus::kMismatch) << explain(v);
  EXPECT_EQ(failed_step(v), "trial 1");
  EXPECT_EQ(v.message.rfind("trial 1 (seed " + std::to_string(trial_seeds(7, 1, "level1/019_relu")[0]) + "): ", 0), 0u) << v.message;
  EXPECT_EQ(v.reward, 0);
}

TEST_F(PipelineTest, AnExtraOutputIsAMismatchAndManyMoreAreAMalformedReply) {
  EXPECT_EQ(judge({{"outputs", 2}}).status, VerdictStatus::kMismatch);
  EXPECT_EQ(judge({{"outputs", 3}}).status, VerdictStatus::kCrash);
}

TEST_F(PipelineTest, InputsChangedInATrialAreInputMutation) {
  const Verdict v = judge({{"changed", true}});
  EXPECT_EQ(v.status_text(), "hack:input_mutation") << explain(v);
  EXPECT_EQ(failed_step(v), "trial 1");
}

TEST_F(PipelineTest, AGuardCheckThatFailsNamesItsKind) {
  const Verdict v = judge({{"guard_fail", "aliasing"}});
  EXPECT_EQ(v.status_text(), "hack:aliasing") << explain(v);
  EXPECT_EQ(failed_step(v), "guard: aliasing");
}

TEST_F(PipelineTest, AGuardKindCrlDoesNotKnowIsAMalformedReplyNotAHack) {
  const Verdict v = judge({{"guard_fail", "made_up"}});
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
}

TEST_F(PipelineTest, WrongOutputsOnlyWhileTimedAreTimedOutputMismatch) {
  const Verdict v = judge({{"compare", "batch_mismatch"}});
  EXPECT_EQ(v.status_text(), "hack:timed_output_mismatch") << explain(v);
  EXPECT_EQ(failed_step(v), "timing");
  EXPECT_EQ(v.trials_passed, 2);
}

TEST_F(PipelineTest, AWorkerThatDiesIsACrashAtTheStageItDiedIn) {
  Verdict v = judge({{"exit_on", "run"}});
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_EQ(failed_step(v), "trial 1");
  v = judge({{"exit_on", "guard"}});
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_EQ(failed_step(v), "guards");
  v = judge({{"exit_on", "time"}});
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_EQ(failed_step(v), "timing");
}

TEST_F(PipelineTest, AReplyMissingAFieldIsAMalformedReplyNeverADefault) {
  const Verdict v = judge({{"drop_field", {"run", "outputs"}}});
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_NE(v.message.find("field 'outputs' is missing"), std::string::npos) << v.message;
}

TEST_F(PipelineTest, TheJudgeRunningOutOfMemoryIsCrlsFailure) {
  const Verdict v = judge({{"compare", "out_of_memory"}});
  EXPECT_EQ(v.status, VerdictStatus::kInternalError) << explain(v);
  EXPECT_EQ(v.reward, 0);
}

}  // namespace
}  // namespace crl::eval
