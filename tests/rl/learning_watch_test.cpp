// ZeroAdvantageWatch (lib/rl/learning_watch.h): a crl stage whose groups all had equal rewards for
// N steps in a row is said once, at the N-th step.
#include "rl/learning_watch.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace crl::rl {
namespace {

TEST(ZeroAdvantageWatch, WarnsOnceWhenEveryGroupWasFlatForNStepsInARow) {
  ZeroAdvantageWatch watch(3);
  EXPECT_EQ(watch.add("crl", 10, 1.0), "");
  EXPECT_EQ(watch.add("crl", 11, 1.0), "");
  const std::string warning = watch.add("crl", 12, 1.0);
  EXPECT_NE(warning.find("crl steps 10 to 12: in every group all rewards were equal (zero advantage)"), std::string::npos) << warning;
  EXPECT_EQ(watch.add("crl", 13, 1.0), "") << "said once per run of steps";
}

TEST(ZeroAdvantageWatch, AStepWithOneInformativeGroupEndsTheRun) {
  ZeroAdvantageWatch watch(2);
  EXPECT_EQ(watch.add("crl", 0, 1.0), "");
  EXPECT_EQ(watch.add("crl", 1, 0.5), "") << "half the groups taught something";
  EXPECT_EQ(watch.add("crl", 2, 1.0), "");
  EXPECT_NE(watch.add("crl", 3, 1.0), "") << "a new run of two flat steps";
  EXPECT_EQ(watch.add("crl", 4, std::nan("")), "") << "not measured: no warning";
  watch.reset();
  EXPECT_EQ(watch.add("crl", 5, 1.0), "") << "a new stage starts a new run";
  EXPECT_THROW(ZeroAdvantageWatch(0), InputError);
}

}  // namespace
}  // namespace crl::rl
