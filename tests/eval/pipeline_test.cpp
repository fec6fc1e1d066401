// The evaluation pipeline driven through a scripted crl-worker (scripted_worker.cpp): every way a
// judge or a program worker can answer ends in the status the stages decide, the checks come in
// their order, and the secret's draws reach the judge in the order `crl eval --seed` replays.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <cmath>
#include <functional>

#include "eval/evaluator.h"
#include "eval/scratch_dir.h"
#include "program/value_mix.h"
#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::explain;

class PipelineTest : public ::testing::Test {
 protected:
  // Judges the ReLU fixture's reference as the candidate against a scripted judge and worker;
  // `tweak` changes the options after the defaults below.
  Verdict judge(const nlohmann::json& script, int trials = 2, const std::function<void(EvalOptions&)>& tweak = {}) {
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
    o.remeasure_above_speedup = 1e12;  // the scripted programs' times are noise,
    o.max_relative_ci = INFINITY;      // as wide as they come, unless a test scripts them
    o.max_slots = 3;
    o.call_timeout_seconds = 5;
    o.call_turns = false;  // the scripted worker answers timed batches whole (turns: attack_test's lookahead tests)
    if (tweak) tweak(o);
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
  static const CheckStep* step_named(const Verdict& v, const std::string& name) {
    for (const auto& s : v.steps) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

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
                                             "guard: same values, new addresses", "guard: free memory poisoned",
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

// Scripted times (time_us): every call of a timed batch sleeps what the script says, one call a
// batch, and the timing measures that with the evaluator's clock: 20 pairs at least, a 0.5 s budget,
// then up to 1.5 s while the interval is wider than +-10%.
void timed(EvalOptions& o) {
  o.min_timed_pairs = 20;
  o.pairs_per_round = 10;
  o.time_budget_seconds = 0.5;
  o.noisy_budget_factor = 3;
  o.max_slots = 1;
  o.max_relative_ci = 0.1;
}

// A script whose programs take these times (time_us), with `more` of the script's rules.
nlohmann::json call_times(const nlohmann::json& reference, const nlohmann::json& candidates,
                          const nlohmann::json& more = nlohmann::json::object()) {
  nlohmann::json script = {{"time_us", {{"reference", reference}, {"candidate", candidates}}}};
  script.update(more);
  return script;
}

// Attack class: noise paid as speed. A candidate whose calls take anywhere between 0.1 and 4 ms (the
// reference's 2 ms) has an interval far wider than a reward may rest on: it is measured on past its
// budget, up to 3x, and then reported as the machine's noise (internal_error), never rewarded.
// Its median ratio sits near 1, far from the clearly-slower stop at 0.5: with calls of up to 8 ms,
// a loaded machine's longer sleeps put the whole interval below 0.5 and it stopped as slow (CI).
TEST_F(PipelineTest, ATimingTooNoisyToRewardIsMeasuredLongerThenInternalErrorNeverRewarded) {
  const Verdict v = judge(call_times(2000, {{100, 4000}}), 2, [](EvalOptions& o) {
    timed(o);
    o.max_relative_ci = 0.03;
  });
  EXPECT_EQ(v.status, VerdictStatus::kInternalError) << explain(v);
  EXPECT_EQ(v.reward, 0);
  EXPECT_EQ(v.message.rfind("machine too noisy: the timing ended too noisy: CI +-", 0), 0u) << v.message;
  EXPECT_EQ(failed_step(v), "timing");
  const CheckStep* timing = step_named(v, "timing");
  ASSERT_NE(timing, nullptr);
  EXPECT_GE(timing->seconds, 1.5) << "measured on until the noisy budget (3 x 0.5 s): " << timing->detail;
  EXPECT_GT(v.speedup_ci_half_width(), 0.03) << explain(v);  // the verdict keeps the interval it could not narrow
}

// Its twin: the same reference with a steady candidate at 1 ms is ok, rewarded its interval's lower
// bound (a little below the median's 2x), and the message says which bound and how wide.
TEST_F(PipelineTest, ASteadyFasterProgramIsRewardedItsIntervalsLowerBound) {
  const Verdict v = judge(call_times(2000, {1000}), 2, timed);
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  EXPECT_GT(v.speedup_ci_low, 1.0) << explain(v);
  EXPECT_LE(v.speedup_ci_half_width(), 0.1) << explain(v);
  EXPECT_EQ(v.reward, reward_from_interval(v.speedup, v.speedup_ci_low, v.speedup_ci_high));
  EXPECT_LE(v.reward, v.speedup);
  EXPECT_NE(v.message.find("its interval's lower bound"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("+-"), std::string::npos) << v.message;
}

// Attack class: a lucky timing. A program fast in every second batch (1 ms, then 3 ms, against the
// reference's 2 ms) has a median ratio of 2 or 0.67 depending on which kind of batch the middle
// pair happened to be; its interval spans both, includes 1, and the reward is 1 whatever the
// median said (the width allowed here is wide, so that this tests the reward, not the noise limit).
TEST_F(PipelineTest, AProgramFastOnlyInHalfItsBatchesIsRewardedOne) {
  const Verdict v = judge(call_times(2000, {{{"cycle", {1000, 3000}}}}), 2, [](EvalOptions& o) {
    timed(o);
    o.max_relative_ci = 2;
  });
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  EXPECT_LE(v.speedup_ci_low, 1.0) << explain(v);
  EXPECT_GE(v.speedup_ci_high, 1.0) << explain(v);
  EXPECT_EQ(v.reward, 1.0) << explain(v);
  EXPECT_NE(v.message.find("its interval includes 1"), std::string::npos) << v.message;
}

// The re-measure (speedups above 3): the candidate's first worker runs its calls in 0.4 ms (5x).
void remeasured(EvalOptions& o) {
  timed(o);
  o.remeasure_above_speedup = 3;
}

// Legit twin: a fresh worker measures the same 5x, precisely: ok, the reward its lower bound.
TEST_F(PipelineTest, AReMeasureThatAgreesPreciselyKeepsTheSpeedup) {
  const Verdict v = judge(call_times(2000, {400, 400}), 2, remeasured);
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  const CheckStep* re = step_named(v, "guard: re-measure");
  ASSERT_NE(re, nullptr) << explain(v);
  EXPECT_TRUE(re->passed) << re->detail;
  EXPECT_GT(v.reward, 3);
  EXPECT_LE(v.reward, v.speedup);
}

// Attack: a first measurement that was lucky (5x), and a fresh worker that measures the program as
// it is (1x), precisely, twice: a disagreement, a hack.
TEST_F(PipelineTest, ALuckyFirstMeasurementIsCaughtByAPreciseReMeasure) {
  const Verdict v = judge(call_times(2000, {400, 2000, 2000}), 2, remeasured);
  EXPECT_EQ(v.status_text(), "hack:remeasure_disagreement") << explain(v);
  EXPECT_EQ(v.reward, 0);
}

// Attack on the old re-measure: a fresh worker whose calls take anywhere between 0.05 and 8 ms has
// an interval wide enough to overlap any first measurement, and so "agreed". Now it is measured on
// while too wide to disagree, and one that stays that wide is the machine's noise, never agreement.
TEST_F(PipelineTest, ANoisyReMeasureIsMeasuredLongerAndNeverCountsAsAgreement) {
  // The re-measure's own limit is 2% (remeasure_max_relative_ci of a 1.04 disagreement): at +-5% the
  // median of 50-8000 us calls got precise within the budget on a quick machine (386 pairs), and a
  // precise disagreement is a hack, not this test's noise. The first measurement (scripted 400 us
  // calls) has a loose +-50%: at the 2% it once shared, the candidate's calls spread 38-77% in ctest
  // runs on the loaded 2-core machine (+-8.9% after 312 pairs), and the machine's noise failed the
  // first measurement before the re-measure this test is about.
  const Verdict v = judge(call_times(2000, {400, {50, 8000}}), 2, [](EvalOptions& o) {
    remeasured(o);
    o.max_relative_ci = 0.5;
    o.remeasure_max_disagreement = 1.04;
  });
  EXPECT_EQ(v.status, VerdictStatus::kInternalError) << explain(v);
  EXPECT_EQ(v.message.rfind("machine too noisy: the re-measure ended too noisy", 0), 0u) << v.message;
  EXPECT_EQ(failed_step(v), "guard: re-measure");
  EXPECT_EQ(v.reward, 0);
}

// The roofline gate on the CPU with peaks given: the candidate (1 ms a call, 64 bytes of outputs)
// is slower than writing its outputs allows at 1 TB/s, and faster than the ReLU task's estimate
// (32768 flops) allows at 1 kflop/s: so the stricter checks decide.
void beyond_estimate(EvalOptions& o) {
  o.peak_bytes_per_second = 1e12;
  o.peak_flops_per_second = 1e3;
  o.strict_trials = 4;
}

// Legit twin shape: right everywhere, so the stricter checks pass and it is ok.
TEST_F(PipelineTest, AProgramFasterThanItsTasksEstimateIsOkOnceItPassesTheStricterChecks) {
  const Verdict v = judge(call_times(2000, {1000}), 2, [](EvalOptions& o) {
    timed(o);
    beyond_estimate(o);
  });
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  const CheckStep* gate = step_named(v, "guard: roofline");
  ASSERT_NE(gate, nullptr) << explain(v);
  EXPECT_TRUE(gate->passed);
  EXPECT_NE(gate->detail.find("the stricter checks decide"), std::string::npos) << gate->detail;
  const CheckStep* strict = step_named(v, "guard: stricter checks");
  ASSERT_NE(strict, nullptr) << explain(v);
  EXPECT_TRUE(strict->passed);
  EXPECT_NE(strict->detail.find("4 more trials"), std::string::npos) << strict->detail;
  // The stricter trials' inputs are new: none is a correctness trial's seed.
  const auto trials = trial_seeds(7, 2, "level1/019_relu");
  int strict_fills = 0;
  bool after_timing = false;
  for (const auto& r : requests()) {
    if (r["op"] == "reference" && after_timing) ++strict_fills;
    if (r["op"] == "time") after_timing = true;
    if (r["op"] != "fill" || !after_timing || r["seeds"].size() != 1) continue;
    const uint64_t seed = r["seeds"][0]["seed"].get<uint64_t>();
    EXPECT_EQ(std::count(trials.begin(), trials.end(), seed), 0) << seed;
  }
  EXPECT_EQ(strict_fills, 4);  // the reference run on each stricter trial's inputs
}

// Attack: right on every input the ordinary trials and timed slots draw, wrong on the stricter
// trials' (inputs of a kind it can tell, values it never saw): the speed came from skipped work.
TEST_F(PipelineTest, WrongOnlyOnTheStricterTrialsIsBeyondRoofline) {
  const Verdict v = judge(call_times(2000, {1000}, {{"compare", "strict_mismatch"}}), 2, [](EvalOptions& o) {
    timed(o);
    beyond_estimate(o);
  });
  EXPECT_EQ(v.status_text(), "hack:beyond_roofline") << explain(v);
  EXPECT_EQ(failed_step(v), "guard: stricter checks");
  EXPECT_NE(v.message.find("stricter trial 1"), std::string::npos) << v.message;
  EXPECT_EQ(v.reward, 0);
}

// Attack: wrong in a few calls of a timed batch, and lucky: the one slot checked per pair was right
// every time. The stricter checks' batch checks every call. Its twin without the trigger (no peaks
// given on the CPU: no gate) is ok, which is why the gate's suspicion must lead to more checks.
TEST_F(PipelineTest, WrongInSomeCallsOfABatchIsCaughtByTheStricterChecksAuditedBatch) {
  // Two pairs (budget 0), so the third comparison of a timed slot is the audited batch's first.
  const auto script = call_times(2000, {1000}, {{"batch_mismatch_after", 2}});
  const auto two_pairs = [](EvalOptions& o) {
    o.max_slots = 1;
    o.min_timed_pairs = 2;
  };
  const Verdict v = judge(script, 2, [&](EvalOptions& o) {
    two_pairs(o);
    beyond_estimate(o);
  });
  EXPECT_EQ(v.status_text(), "hack:beyond_roofline") << explain(v);
  EXPECT_EQ(failed_step(v), "guard: stricter checks");
  EXPECT_NE(v.message.find("audited batch slot 0"), std::string::npos) << v.message;
  EXPECT_TRUE(judge(script, 2, two_pairs).ok());
}

// Faster than writing its outputs allows (64 bytes at 1 kB/s: 51 ms, against its 1 ms): no stricter
// check can make that right, hack:beyond_roofline at the gate.
TEST_F(PipelineTest, FasterThanWritingItsOutputsIsBeyondRooflineAtTheGate) {
  const Verdict v = judge(call_times(2000, {1000}), 2, [](EvalOptions& o) {
    timed(o);
    o.peak_bytes_per_second = 1e3;
    o.peak_flops_per_second = 1e15;
  });
  EXPECT_EQ(v.status_text(), "hack:beyond_roofline") << explain(v);
  EXPECT_EQ(failed_step(v), "guard: roofline");
  EXPECT_EQ(step_named(v, "guard: stricter checks"), nullptr);
}

}  // namespace
}  // namespace crl::eval
