// Timing statistics: quantiles, IQR, and the paired bootstrap CI of the speedup.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "eval/timing_stats.h"

namespace crl::eval {
namespace {

TEST(TimingStats, MedianAndQuantilesInterpolate) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.25), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
  // Ratios over a time of 0 are infinite: never NaN (inf - inf) between two of them.
  EXPECT_TRUE(std::isinf(quantile({1, INFINITY, INFINITY}, 0.9)));
  EXPECT_TRUE(std::isinf(quantile({1, 2, INFINITY}, 0.75)));
  EXPECT_DOUBLE_EQ(quantile({1, 2, INFINITY}, 0.5), 2);
  const TimeSummary t = summarize_times({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(t.median_us, 3);
  EXPECT_DOUBLE_EQ(t.iqr_us, 2);
  EXPECT_EQ(t.samples, 5);
}

TEST(TimingStats, SpeedupOfEqualProgramsHasACiAroundOne) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(100.0, 2.0);
  std::vector<double> ref;
  std::vector<double> cand;
  for (int i = 0; i < 200; ++i) {
    ref.push_back(noise(rng));
    cand.push_back(noise(rng));
  }
  const auto e = estimate_speedup(ref, cand);
  EXPECT_LE(e.ci_low, 1.0);
  EXPECT_GE(e.ci_high, 1.0);
  EXPECT_LT(e.relative_half_width(), 0.01);
  EXPECT_LE(e.ci_low, e.speedup);
  EXPECT_GE(e.ci_high, e.speedup);
}

TEST(TimingStats, TwiceAsFastCandidateGivesSpeedupTwo) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> ref;
  std::vector<double> cand;
  for (int i = 0; i < 100; ++i) {
    ref.push_back(200 + noise(rng));
    cand.push_back(100 + noise(rng));
  }
  const auto e = estimate_speedup(ref, cand);
  EXPECT_NEAR(e.speedup, 2.0, 0.02);
  EXPECT_GT(e.ci_low, 1.95);
  EXPECT_LT(e.ci_high, 2.05);
}

TEST(TimingStats, FewNoisySamplesGiveAWideInterval) {
  const auto e = estimate_speedup({100, 150, 80}, {90, 160, 120});
  EXPECT_GT(e.relative_half_width(), 0.05);
}

TEST(TimingStats, DeterministicForASeed) {
  const std::vector<double> ref = {10, 11, 12, 13, 9, 10.5};
  const std::vector<double> cand = {5, 6, 5.5, 7, 4.5, 5.2};
  const auto a = estimate_speedup(ref, cand, 500, 3);
  const auto b = estimate_speedup(ref, cand, 500, 3);
  EXPECT_EQ(a.ci_low, b.ci_low);
  EXPECT_EQ(a.ci_high, b.ci_high);
}

TEST(TimingStats, MismatchedOrEmptyListsAreAnError) {
  EXPECT_THROW(estimate_speedup({1, 2}, {1}), Error);
  EXPECT_THROW(estimate_speedup({}, {}), Error);
}

}  // namespace
}  // namespace crl::eval
