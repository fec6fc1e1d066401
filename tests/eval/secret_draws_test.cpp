// The secret's draws: their order and their values are what `crl eval --seed S` replays, so both
// are pinned here. The values are c6057c8's (its `crl eval --seed 7` named trial 3's seed
// 42432343265498461 for level1/019_relu in a mismatch message); a change to any of them changes
// every replay and must be deliberate.
#include <gtest/gtest.h>

#include <algorithm>

#include "eval/secret_draws.h"

namespace crl::eval {
namespace {

const std::string kTask = "level1/019_relu";

TEST(SecretDraws, TheTrialSeedsOfASecretArePinned) {
  const auto seeds = trial_seeds(7, 3, kTask);
  ASSERT_EQ(seeds.size(), 3u);
  EXPECT_EQ(seeds, (std::vector<uint64_t>{195517188723480036u, 663849589214166820u, 42432343265498461u}));
  // Another task or secret draws other seeds.
  EXPECT_NE(trial_seeds(8, 3, kTask), seeds);
  EXPECT_NE(trial_seeds(7, 3, "level1/020_leaky_relu"), seeds);
  // Edge trials draw from their own purpose: never a trial's seed.
  for (const uint64_t e : edge_trial_seeds(7, 2, kTask)) EXPECT_EQ(std::count(seeds.begin(), seeds.end(), e), 0);
}

// The judge's domain probe draws from a purpose of its own: none of the trials' or timing's draws
// moved when it was added (the pins above), and it is none of them.
TEST(SecretDraws, TheValueProbeHasAPurposeOfItsOwn) {
  const uint64_t probe = value_probe_seed(7, kTask);
  EXPECT_EQ(probe, value_probe_seed(7, kTask));
  EXPECT_NE(probe, value_probe_seed(8, kTask));
  const auto seeds = trial_seeds(7, 5, kTask);
  EXPECT_EQ(std::count(seeds.begin(), seeds.end(), probe), 0);
  EXPECT_NE(probe, timing_draw(7, kTask, 0));
}

TEST(SecretDraws, TimingDrawsComeInTheOrderWarmUpThenPerPairSeedsOrderAndCheckedSlot) {
  constexpr int kSlots = 4;
  SecretDraws draws(7, kTask);
  const auto warmup = draw_warmup(draws, kSlots);
  const PairDraws first = draw_pair(draws, kSlots);
  const PairDraws second = draw_pair(draws, kSlots);
  const uint64_t sixty = (uint64_t{1} << 60) - 1;
  uint64_t k = 0;
  for (int s = 0; s < kSlots; ++s) EXPECT_EQ(warmup[s], timing_draw(7, kTask, k++) & sixty) << s;
  for (const PairDraws* pair : {&first, &second}) {
    for (int s = 0; s < kSlots; ++s) EXPECT_EQ(pair->seeds[s], timing_draw(7, kTask, k++) & sixty) << s;
    EXPECT_EQ(pair->reference_first, (timing_draw(7, kTask, k++) & 1) == 1);
    EXPECT_EQ(pair->checked_slot, static_cast<int>(timing_draw(7, kTask, k++) % kSlots));
  }
  EXPECT_EQ(timing_draw(7, kTask, 0), 1132173411202866089u);
  EXPECT_EQ(timing_draw(7, kTask, 5), 783921335259326759u);
}

TEST(SecretDraws, AFreshSecretHasSixtyBitsAndDiffersEachTime) {
  const uint64_t a = fresh_secret();
  const uint64_t b = fresh_secret();
  EXPECT_LT(a, uint64_t{1} << 60);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace crl::eval
