// The pure parts of the evaluation's stages, without processes: how a timed batch is sized, when
// timing stops and how many pairs come next, the roofline gate's verdict, and when a re-measure
// agrees with the first measurement.
#include <gtest/gtest.h>

#include "eval/batch_plan.h"
#include "eval/stages/remeasure.h"
#include "eval/stages/roofline_gate.h"
#include "eval/stages/stop_rule.h"

namespace crl::eval {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

BatchPlanLimits cpu_limits() { return {0, 512, 64, 16 * kGiB, 4 * kGiB}; }
BatchPlanLimits gpu_limits() { return {5000, 512, 64, 16 * kGiB, 4 * kGiB}; }

TEST(BatchPlan, SmallInputsOnTheCpuFillMaxSlotsToExceedTheCaches) {
  // 128 KiB of inputs a slot: 2049 slots would exceed 256 MiB, max_slots caps it.
  EXPECT_EQ(plan_timed_batch(128 * kKiB, 128 * kKiB, 0, cpu_limits()), 64);
  // 100 MiB a slot: three slots exceed the caches' 256 MiB.
  EXPECT_EQ(plan_timed_batch(100 * kMiB, kMiB, 0, cpu_limits()), 3);
}

TEST(BatchPlan, OnTheGpuABatchLastsMinBatchUsByTheReferencesCall) {
  // A 10 us call: 500 calls for 5 ms, within max_batch_calls.
  EXPECT_EQ(plan_timed_batch(kKiB, kKiB, 10, gpu_limits()), 500);
  // A 1 us call would want 5000: capped at max_batch_calls.
  EXPECT_EQ(plan_timed_batch(kKiB, kKiB, 1, gpu_limits()), 512);
  // A call not timed (0) counts as 1 us.
  EXPECT_EQ(plan_timed_batch(kKiB, kKiB, 0, gpu_limits()), 512);
}

TEST(BatchPlan, TheArenaAndTheHeldOutputsBoundTheSlots) {
  // 256 MiB inputs and outputs, a 10 us call: 500 wanted, the arena holds 64, the outputs 16.
  EXPECT_EQ(plan_timed_batch(256 * kMiB, 256 * kMiB, 10, gpu_limits()), 16);
  // Outputs larger than the whole budget still leave one slot.
  EXPECT_EQ(plan_timed_batch(kKiB, 8 * kGiB, 10, gpu_limits()), 1);
}

StopRule rule() { return {20, 10, 0.01, 10000, 5, 0.5}; }

SpeedupEstimate estimate(double half_width) { return {1.0, 1.0 - half_width, 1.0 + half_width}; }

TEST(StopRule, StopsWhenTheIntervalIsNarrowTheBudgetSpentOrThePairsRunOut) {
  EXPECT_EQ(next_round(rule(), 20, 1, estimate(0.005), false).reason, "CI target reached");
  EXPECT_EQ(next_round(rule(), 20, 11, estimate(0.05), false).reason, "time budget spent");
  EXPECT_EQ(next_round(rule(), 10000, 1, estimate(0.05), false).reason, "pair limit reached");
  const NextRound slow = next_round(rule(), 8, 11, estimate(0.05), true);
  EXPECT_TRUE(slow.stop);
  EXPECT_EQ(slow.reason, "time budget spent, the candidate clearly slower (CI below 0.5)");
  // Narrow but too few pairs: on.
  EXPECT_FALSE(next_round(rule(), 19, 1, estimate(0.001), false).stop);
}

TEST(StopRule, TheNextRoundTimesAQuarterOfWhatTheBudgetAllowsButAtLeastWhatMinPairsNeeds) {
  // 10 pairs in 1 s: 0.1 s a pair, 9 s left, a quarter of that is 22 pairs.
  EXPECT_EQ(next_round(rule(), 10, 1, estimate(0.05), false).pairs, 22);
  // Little budget left: still the 10 that min_pairs needs.
  EXPECT_EQ(next_round(rule(), 10, 9.9, estimate(0.05), false).pairs, 10);
  // Budget spent with enough pairs stops; with too few it goes on for what is missing.
  EXPECT_EQ(next_round(rule(), 15, 12, estimate(0.05), false).pairs, 5);
}

TEST(StopRule, OnlyACandidateBetweenTheSlowAndTheOrdinaryMinimumWithTheBudgetSpentMayStopAsSlow) {
  EXPECT_TRUE(may_stop_as_slow(rule(), 10, 10.5));
  EXPECT_FALSE(may_stop_as_slow(rule(), 10, 5));    // budget not spent
  EXPECT_FALSE(may_stop_as_slow(rule(), 4, 10.5));  // fewer than min_pairs_when_slow
  EXPECT_FALSE(may_stop_as_slow(rule(), 20, 10.5)); // the ordinary minimum reached
  StopRule fixed = rule();
  fixed.budget_seconds = 0;  // the re-measure's fixed pairs never stop early
  EXPECT_FALSE(may_stop_as_slow(fixed, 10, 10.5));
}

TEST(RooflineGate, FasterThanTheMemoryAllowsFailsSlowerPasses) {
  const DevicePeaks h100{"H100", 3.35e12, 989e12};
  // 1 GB at 3.35 TB/s with a 1.25 margin: 238.8 us at least.
  const RooflineCheck fast = roofline_check(100e-6, 1e9, 0, h100, 1.25, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(fast.passed);
  EXPECT_NE(fast.detail.find("allows at least 238.8 us"), std::string::npos) << fast.detail;
  EXPECT_TRUE(roofline_check(300e-6, 1e9, 0, h100, 1.25, "NVIDIA H100 80GB HBM3").passed);
  // Compute-bound: 1e15 flops at 989 TF/s take a second; 0.5 s is impossible.
  EXPECT_FALSE(roofline_check(0.5, 0, 1e15, h100, 1.25, "NVIDIA H100 80GB HBM3").passed);
}

TEST(RooflineGate, AnUnknownGpuSkipsTheGateAndSaysSo) {
  const RooflineCheck check = roofline_check(1e-9, 1e12, 1e15, std::nullopt, 1.25, "Mystery GPU");
  EXPECT_TRUE(check.passed);
  EXPECT_EQ(check.detail, "skipped: no peaks known for 'Mystery GPU'");
}

TEST(Remeasure, IntervalsAgreeUnlessOneLiesWhollyAboveTheOtherByMoreThanTheFactor) {
  EXPECT_TRUE(intervals_agree({4, 3.8, 4.2}, {4.1, 3.9, 4.3}, 1.5));
  EXPECT_TRUE(intervals_agree({4, 3.8, 4.2}, {2, 1.9, 2.85}, 1.5));  // 3.8 / 2.85 = 1.33
  EXPECT_FALSE(intervals_agree({4, 3.8, 4.2}, {2, 1.9, 2.1}, 1.5));  // 3.8 / 2.1 = 1.81
  EXPECT_FALSE(intervals_agree({2, 1.9, 2.1}, {4, 3.8, 4.2}, 1.5));  // either way round
}

}  // namespace
}  // namespace crl::eval
