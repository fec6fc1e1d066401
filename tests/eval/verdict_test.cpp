// Verdict: the CUDA-L1 reward rounding, the conservative reward of an interval, status names, log
// truncation and the JSON round trip.
#include <gtest/gtest.h>

#include <cmath>

#include <vector>

#include "core/error.h"
#include "eval/timing_stats.h"
#include "eval/verdict.h"

namespace crl::eval {
namespace {

TEST(Reward, TruncatesTowardOneAtTwoDecimals) {
  EXPECT_DOUBLE_EQ(reward_from_speedup(1.118), 1.11);
  EXPECT_DOUBLE_EQ(reward_from_speedup(0.992), 1.00);
  EXPECT_DOUBLE_EQ(reward_from_speedup(0.987), 0.99);
  EXPECT_DOUBLE_EQ(reward_from_speedup(1.0), 1.0);
  EXPECT_DOUBLE_EQ(reward_from_speedup(3.999), 3.99);
  EXPECT_DOUBLE_EQ(reward_from_speedup(0.5), 0.5);
  // Values exact in decimal but not in binary keep their last cent.
  EXPECT_DOUBLE_EQ(reward_from_speedup(1.15), 1.15);
  EXPECT_DOUBLE_EQ(reward_from_speedup(0.29), 0.29);
}

TEST(Reward, NonFiniteOrNonPositiveSpeedupGivesZero) {
  EXPECT_EQ(reward_from_speedup(0), 0);
  EXPECT_EQ(reward_from_speedup(-2), 0);
  EXPECT_EQ(reward_from_speedup(INFINITY), 0);
  EXPECT_EQ(reward_from_speedup(NAN), 0);
}

TEST(Reward, AnIntervalThatIncludesOneIsRewardedAsOne) {
  // The noise the issue saw paid as speed: a plain ReLU at 1.6x with a 95% interval of 0.56-2.94
  // on a loaded CPU node earned 1.6; it can tell the program from the reference in no direction.
  EXPECT_DOUBLE_EQ(reward_from_interval(1.6, 0.56, 2.94), 1.0);
  EXPECT_EQ(reward_basis(1.6, 0.56, 2.94), "its interval includes 1");
  // Slower at the median, but within the noise: 1 as well, not 0.97.
  EXPECT_DOUBLE_EQ(reward_from_interval(0.97, 0.93, 1.02), 1.0);
  // A bound exactly at 1 includes it.
  EXPECT_DOUBLE_EQ(reward_from_interval(1.2, 1.0, 1.4), 1.0);
}

TEST(Reward, OtherwiseTheBoundNearerOneTruncatedTowardOne) {
  EXPECT_DOUBLE_EQ(reward_from_interval(3.3, 2.917, 3.7), 2.91);  // faster: the lower bound
  EXPECT_EQ(reward_basis(3.3, 2.917, 3.7), "its interval's lower bound");
  EXPECT_DOUBLE_EQ(reward_from_interval(0.5, 0.452, 0.553), 0.56);  // slower: the upper bound, toward 1
  EXPECT_EQ(reward_basis(0.5, 0.452, 0.553), "its interval's upper bound");
  // A narrow interval costs a precise measurement almost nothing against the old median reward.
  EXPECT_DOUBLE_EQ(reward_from_interval(1.118, 1.112, 1.124), 1.11);
  // A bootstrap bound beyond the point estimate (few, lopsided samples) never pays more than it.
  EXPECT_DOUBLE_EQ(reward_from_interval(2.0, 2.2, 2.5), 2.0);
  EXPECT_DOUBLE_EQ(reward_from_interval(0.5, 0.3, 0.45), 0.5);
}

TEST(Reward, NothingMeasuredOrABrokenIntervalGivesZero) {
  EXPECT_EQ(reward_from_interval(0, 0, 0), 0);  // not timed
  EXPECT_EQ(reward_from_interval(INFINITY, 2, INFINITY), 0);
  EXPECT_EQ(reward_from_interval(NAN, 0.5, 2), 0);
  EXPECT_EQ(reward_from_interval(2, NAN, 3), 0);
  EXPECT_EQ(reward_from_interval(2, 3, 1.5), 0);  // bounds the wrong way round
  EXPECT_EQ(reward_basis(0, 0, 0), "");
}

// Attack: a timing lucky in half its pairs (a program whose calls are fast only now and then, or a
// machine that happened to be quiet for one program's batches). The median's ratio says 1.33; the
// interval says it may be 1, and so does the reward. Its twin, fast in every pair, keeps its speed.
TEST(Reward, ATimingLuckyInHalfItsPairsEarnsNothingBeyondOne) {
  std::vector<double> reference(20, 100.0), lucky, steady(20, 50.0);
  for (int i = 0; i < 20; ++i) lucky.push_back(i % 2 == 0 ? 50.0 : 100.0);
  const SpeedupEstimate l = estimate_speedup(reference, lucky);
  EXPECT_GT(l.speedup, 1.2);
  EXPECT_DOUBLE_EQ(reward_from_speedup(l.speedup), 1.33);  // what the median alone paid
  EXPECT_DOUBLE_EQ(reward_from_interval(l.speedup, l.ci_low, l.ci_high), 1.0) << l.ci_low << ".." << l.ci_high;
  const SpeedupEstimate s = estimate_speedup(reference, steady);
  EXPECT_DOUBLE_EQ(reward_from_interval(s.speedup, s.ci_low, s.ci_high), 2.0);
}

TEST(Verdict, ReportsTheIntervalsRelativeHalfWidth) {
  Verdict v;
  v.speedup = 2.0;
  v.speedup_ci_low = 1.9;
  v.speedup_ci_high = 2.1;
  EXPECT_NEAR(v.speedup_ci_half_width(), 0.05, 1e-12);
  EXPECT_NEAR(to_json(v)["speedup_ci_half_width"].get<double>(), 0.05, 1e-12);
  v.speedup = 0;  // not timed: no width, written as 0
  EXPECT_EQ(v.speedup_ci_half_width(), INFINITY);
  EXPECT_EQ(to_json(v)["speedup_ci_half_width"].get<double>(), 0.0);
}

TEST(VerdictStatus, ParsesEveryNameAndHackKinds) {
  for (auto s : {VerdictStatus::kOk, VerdictStatus::kCompileError, VerdictStatus::kRuntimeError,
                 VerdictStatus::kTimeout, VerdictStatus::kCrash, VerdictStatus::kMismatch, VerdictStatus::kFormatError,
                 VerdictStatus::kInternalError}) {
    EXPECT_EQ(parse_verdict_status(to_string(s)), s);
  }
  std::string kind;
  EXPECT_EQ(parse_verdict_status("hack:cached_output", &kind), VerdictStatus::kHack);
  EXPECT_EQ(kind, "cached_output");
  EXPECT_THROW(parse_verdict_status("fine"), InputError);
  EXPECT_THROW(parse_verdict_status("hack:"), InputError);
}

TEST(TruncateLog, KeepsHeadAndTailAndSaysHowMuchWasCut) {
  const std::string log = std::string(1000, 'a') + std::string(1000, 'z');
  const std::string cut = truncate_log(log, 300);
  EXPECT_EQ(cut.substr(0, 200), std::string(200, 'a'));
  EXPECT_EQ(cut.substr(cut.size() - 100), std::string(100, 'z'));
  EXPECT_NE(cut.find("1700 bytes cut"), std::string::npos) << cut;
  EXPECT_EQ(truncate_log("short", 300), "short");
}

TEST(VerdictJson, RoundTripKeepsEveryField) {
  Verdict v;
  v.task_id = "level1/019_relu";
  v.candidate = "cand.crl";
  v.backend = "cpu";
  v.scale = "small";
  v.baseline = "cuda_graph";
  v.format = "kernelbench";
  v.params = "kernelbench";
  v.status = VerdictStatus::kHack;
  v.hack_kind = "returned_input";
  v.message = "returned its input";
  v.trials_run = 5;
  v.trials_passed = 4;
  v.reference_time = {120.5, 3.25, 40};
  v.candidate_time = {60.25, 1.5, 40};
  v.speedup = 2.0;
  v.speedup_ci_low = 1.75;  // exact in binary, and so is the half width they give (0.125)
  v.speedup_ci_high = 2.25;
  v.reward = 0;
  v.steps = {{"compile", true, "cache hit", 0.01}, {"trial 1", false, "output 0 differs", 0.2}};
  v.compile_log = "warning: x";
  v.worker_log = "hello";
  v.seconds = 3.5;
  v.secret = 123456789;
  // Written by hand, so a field that to_json drops (or renames) fails here, whatever
  // verdict_from_json does with it.
  const auto expected = nlohmann::json::parse(R"({
    "task": "level1/019_relu", "candidate": "cand.crl", "backend": "cpu", "scale": "small",
    "baseline": "cuda_graph", "format": "kernelbench", "params": "kernelbench",
    "status": "hack:returned_input", "message": "returned its input",
    "trials_run": 5, "trials_passed": 4,
    "reference_time": {"median_us": 120.5, "iqr_us": 3.25, "samples": 40},
    "candidate_time": {"median_us": 60.25, "iqr_us": 1.5, "samples": 40},
    "speedup": 2.0, "speedup_ci": [1.75, 2.25], "speedup_ci_half_width": 0.125, "reward": 0.0,
    "steps": [{"name": "compile", "passed": true, "detail": "cache hit", "seconds": 0.01},
              {"name": "trial 1", "passed": false, "detail": "output 0 differs", "seconds": 0.2}],
    "compile_log": "warning: x", "worker_log": "hello", "seconds": 3.5, "secret": 123456789})");
  EXPECT_EQ(to_json(v), expected) << to_json(v).dump(2);
  // And back: every field of the hand-written JSON lands in its member (a field that
  // verdict_from_json drops would be default here).
  const Verdict back = verdict_from_json(expected);
  EXPECT_EQ(back.task_id, v.task_id);
  EXPECT_EQ(back.candidate, v.candidate);
  EXPECT_EQ(back.backend, v.backend);
  EXPECT_EQ(back.scale, v.scale);
  EXPECT_EQ(back.baseline, "cuda_graph");
  EXPECT_EQ(back.format, "kernelbench");
  EXPECT_EQ(back.params, "kernelbench");
  EXPECT_EQ(back.status, VerdictStatus::kHack);
  EXPECT_EQ(back.hack_kind, "returned_input");
  EXPECT_EQ(back.message, v.message);
  EXPECT_EQ(back.trials_run, 5);
  EXPECT_EQ(back.trials_passed, 4);
  EXPECT_EQ(back.reference_time.median_us, 120.5);
  EXPECT_EQ(back.reference_time.iqr_us, 3.25);
  EXPECT_EQ(back.reference_time.samples, 40);
  EXPECT_EQ(back.candidate_time.median_us, 60.25);
  EXPECT_EQ(back.candidate_time.iqr_us, 1.5);
  EXPECT_EQ(back.candidate_time.samples, 40);
  EXPECT_EQ(back.speedup, 2.0);
  EXPECT_EQ(back.speedup_ci_low, 1.75);
  EXPECT_EQ(back.speedup_ci_high, 2.25);
  EXPECT_EQ(back.reward, 0.0);
  ASSERT_EQ(back.steps.size(), 2u);
  EXPECT_EQ(back.steps[0].name, "compile");
  EXPECT_TRUE(back.steps[0].passed);
  EXPECT_EQ(back.steps[0].detail, "cache hit");
  EXPECT_EQ(back.steps[0].seconds, 0.01);
  EXPECT_EQ(back.steps[1].name, "trial 1");
  EXPECT_FALSE(back.steps[1].passed);
  EXPECT_EQ(back.steps[1].detail, "output 0 differs");
  EXPECT_EQ(back.steps[1].seconds, 0.2);
  EXPECT_EQ(back.compile_log, "warning: x");
  EXPECT_EQ(back.worker_log, "hello");
  EXPECT_EQ(back.seconds, 3.5);
  EXPECT_EQ(back.secret, 123456789u);
}

// A candidate timed at 0 us has an infinite speedup, and its interval may hold one: JSON has no
// infinity (nlohmann writes null), and a job's trainer that read such a verdict ended the job.
TEST(VerdictJson, InfiniteAndUndefinedSpeedupsSurviveTheRoundTrip) {
  Verdict v;
  v.status = VerdictStatus::kOk;
  v.speedup = INFINITY;
  v.speedup_ci_low = 3.5;
  v.speedup_ci_high = NAN;
  const nlohmann::json j = nlohmann::json::parse(to_json(v).dump());
  EXPECT_EQ(j["speedup"], "inf");
  EXPECT_EQ(j["speedup_ci"][1], "nan");
  const Verdict back = verdict_from_json(j);
  EXPECT_TRUE(std::isinf(back.speedup) && back.speedup > 0);
  EXPECT_EQ(back.speedup_ci_low, 3.5);
  EXPECT_TRUE(std::isnan(back.speedup_ci_high));
}

TEST(VerdictJson, MissingOrIllTypedFieldIsNamed) {
  Verdict v;
  v.status = VerdictStatus::kOk;
  auto j = to_json(v);
  j.erase("trials_run");
  try {
    verdict_from_json(j);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("trials_run"), std::string::npos) << e.what();
  }
  j = to_json(v);
  j["speedup"] = "fast";
  EXPECT_THROW(verdict_from_json(j), InputError);
  j = to_json(v);
  j["speedup_ci"] = {1.0};
  EXPECT_THROW(verdict_from_json(j), InputError);
}

}  // namespace
}  // namespace crl::eval
