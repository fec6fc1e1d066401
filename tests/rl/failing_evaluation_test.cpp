// The job's watch over evaluation that fails for everything (rl/failing_evaluation.h).
#include "rl/failing_evaluation.h"

#include <gtest/gtest.h>

namespace crl::rl {
namespace {

TEST(FailingEvaluationWatch, StopsAfterTheLimitOfStepsInARowWhoseEveryProgramFailed) {
  FailingEvaluationWatch watch(3);
  EXPECT_EQ(watch.step(4, 8, 8, "rollout 32 (level1/019_relu): the judge failed"), "");
  EXPECT_EQ(watch.step(5, 6, 6, "rollout 40: later"), "");
  const std::string stop = watch.step(6, 8, 8, "rollout 48: later still");
  EXPECT_NE(stop.find("evaluation failed"), std::string::npos) << stop;
  EXPECT_NE(stop.find("last 3 step(s) (to step 6)"), std::string::npos) << stop;
  // The first failure of the run is the one quoted: the cause, not its echoes.
  EXPECT_NE(stop.find("rollout 32 (level1/019_relu): the judge failed"), std::string::npos) << stop;
  EXPECT_EQ(stop.find("later"), std::string::npos) << stop;
  EXPECT_NE(stop.find("run the same command to resume"), std::string::npos) << stop;
}

TEST(FailingEvaluationWatch, OneProgramJudgedPlainlyStartsTheCountAgain) {
  FailingEvaluationWatch watch(2);
  EXPECT_EQ(watch.step(0, 4, 4, "a"), "");
  EXPECT_EQ(watch.step(1, 4, 3, "b"), "");  // one verdict was not an internal error
  EXPECT_EQ(watch.failed_in_a_row(), 0);
  EXPECT_EQ(watch.step(2, 4, 4, "c"), "");
  const std::string stop = watch.step(3, 4, 4, "d");
  EXPECT_NE(stop.find("the first: c"), std::string::npos) << stop;
}

TEST(FailingEvaluationWatch, AStepWithNothingJudgedNeitherCountsNorResets) {
  FailingEvaluationWatch watch(2);
  EXPECT_EQ(watch.step(0, 2, 2, "a"), "");
  EXPECT_EQ(watch.step(1, 0, 0, ""), "");  // every completion a format error: evaluation not seen
  EXPECT_EQ(watch.failed_in_a_row(), 1);
  EXPECT_NE(watch.step(2, 2, 2, "b").find("the first: a"), std::string::npos);
}

TEST(FailingEvaluationWatch, LimitZeroNeverStops) {
  FailingEvaluationWatch watch(0);
  for (int64_t s = 0; s < 50; ++s) EXPECT_EQ(watch.step(s, 4, 4, "x"), "") << s;
  EXPECT_EQ(watch.failed_in_a_row(), 50);
}

}  // namespace
}  // namespace crl::rl
