// Reward shaping: running normalisation over a window, clipping, group advantages, exclusions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "rl/reward_shaping.h"

namespace crl::rl {
namespace {

TEST(RewardShaping, NormalisesWithTheWindowAndClips) {
  RewardNormalizer n(4, 1.5);
  // Window {0, 0, 0, 4}: mean 1, population std sqrt(3).
  const auto out = n.normalize({0, 0, 0, 4});
  EXPECT_NEAR(out[0], -1 / std::sqrt(3.0), 1e-12);
  EXPECT_DOUBLE_EQ(out[3], 1.5);  // 3 / sqrt(3) = 1.73, clipped to 1.5
  // The window keeps the last 4: {0, 4, 2, 2} -> mean 2, std sqrt(2).
  const auto next = n.normalize({2, 2});
  EXPECT_EQ(n.size(), 4u);
  EXPECT_DOUBLE_EQ(n.mean(), 2.0);
  EXPECT_NEAR(next[0], 0.0, 1e-12);
  EXPECT_NEAR(n.stddev(), std::sqrt(2.0), 1e-12);
}

TEST(RewardShaping, ConstantRewardsDoNotDivideByZero) {
  RewardNormalizer n(10, 1.5);
  for (double v : n.normalize({1, 1, 1})) EXPECT_DOUBLE_EQ(v, 0.0);
}

TEST(RewardShaping, ClipIsConfigurable) {
  RewardNormalizer n(100, 0.5);
  const auto out = n.normalize({0, 0, 0, 0, 10});
  EXPECT_DOUBLE_EQ(out[4], 0.5);
  EXPECT_DOUBLE_EQ(out[0], -0.5);
}

TEST(RewardShaping, GroupAdvantagesAndInternalErrorsLeftOut) {
  RewardNormalizer n(100, 10.0);
  // Two groups of 3; rollout 2 is an internal error (excluded), rollout 5 too.
  const std::vector<double> rewards = {1.0, 2.0, 0.0, 3.0, 3.0, 0.0};
  const std::vector<bool> included = {true, true, false, true, true, false};
  const ShapedRewards s = shape_rewards(rewards, included, 3, n);
  EXPECT_EQ(n.size(), 4u) << "excluded rewards entered the window";
  EXPECT_DOUBLE_EQ(s.advantages[2], 0.0);
  EXPECT_DOUBLE_EQ(s.normalized[2], 0.0);
  // Group 0: two included rewards, advantages +-1/sqrt(2) (Bessel's std of two values) in sign.
  EXPECT_LT(s.advantages[0], 0.0);
  EXPECT_GT(s.advantages[1], 0.0);
  EXPECT_NEAR(s.advantages[0], -s.advantages[1], 1e-6);  // group_advantages computes in fp32
  EXPECT_NEAR(std::abs(s.advantages[0]), 1 / std::sqrt(2.0), 1e-3);
  // Group 1: equal rewards -> advantage 0.
  EXPECT_DOUBLE_EQ(s.advantages[3], 0.0);
  EXPECT_DOUBLE_EQ(s.advantages[4], 0.0);
}

TEST(RewardShaping, CheckpointStateRoundTrips) {
  RewardNormalizer a(3, 1.5);
  a.normalize({1, 2, 3, 4});
  RewardNormalizer b(3, 1.5);
  b.load_json(a.to_json(), "state");
  EXPECT_DOUBLE_EQ(b.mean(), a.mean());
  EXPECT_EQ(b.normalize({5}), a.normalize({5}));
  EXPECT_THROW(b.load_json(nlohmann::json{{"rewards", {"x"}}}, "state"), InputError);
  EXPECT_THROW(RewardNormalizer(1, 1.5), InputError);
}

}  // namespace
}  // namespace crl::rl
