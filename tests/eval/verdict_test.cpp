// Verdict: the CUDA-L1 reward rounding, status names, log truncation and the JSON round trip.
#include <gtest/gtest.h>

#include "core/error.h"
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
  v.status = VerdictStatus::kHack;
  v.hack_kind = "returned_input";
  v.message = "returned its input";
  v.trials_run = 5;
  v.trials_passed = 4;
  v.reference_time = {120.5, 3.25, 40};
  v.candidate_time = {60.25, 1.5, 40};
  v.speedup = 2.0;
  v.speedup_ci_low = 1.98;
  v.speedup_ci_high = 2.02;
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
    "baseline": "cuda_graph", "status": "hack:returned_input", "message": "returned its input",
    "trials_run": 5, "trials_passed": 4,
    "reference_time": {"median_us": 120.5, "iqr_us": 3.25, "samples": 40},
    "candidate_time": {"median_us": 60.25, "iqr_us": 1.5, "samples": 40},
    "speedup": 2.0, "speedup_ci": [1.98, 2.02], "reward": 0.0,
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
  EXPECT_EQ(back.speedup_ci_low, 1.98);
  EXPECT_EQ(back.speedup_ci_high, 2.02);
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
