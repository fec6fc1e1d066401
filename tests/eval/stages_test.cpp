// The pure parts of the evaluation's stages, without processes: how a timed batch is sized, when
// timing stops and how many pairs come next (a noisy measurement goes on, then ends too noisy), the
// roofline gate's floor and estimate, the stricter trials' kinds, and when a re-measure agrees
// with the first measurement (only when it is precise enough to disagree).
#include <gtest/gtest.h>

#include "eval/batch_plan.h"
#include "eval/stages/remeasure.h"
#include "eval/stages/roofline_gate.h"
#include "eval/stages/stop_rule.h"
#include "eval/stages/strict_checks.h"
#include "program/task_spec.h"

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

// A 10 s budget, +-1% target, +-10% at most, 30 s in all for a noisy measurement.
StopRule rule() { return {20, 10, 0.01, 10000, 5, 0.5, 0.1, 30}; }

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

TEST(StopRule, ANoisyMeasurementGoesOnPastItsBudgetThenEndsTooNoisy) {
  // +-30% when the budget is spent: on, a quarter of what the noisy budget still allows (20 pairs
  // in 11 s: 0.55 s a pair, 19 s left, a quarter is 8 pairs).
  const NextRound on = next_round(rule(), 20, 11, estimate(0.3), false);
  EXPECT_FALSE(on.stop);
  EXPECT_EQ(on.pairs, 8);
  // Still +-30% with the noisy budget spent: stopped, too noisy, and the reason says how wide.
  const NextRound noisy = next_round(rule(), 60, 31, estimate(0.3), false);
  EXPECT_TRUE(noisy.stop);
  EXPECT_TRUE(noisy.too_noisy);
  EXPECT_EQ(noisy.reason.rfind("too noisy: CI +-30.0% after 60 pairs", 0), 0u) << noisy.reason;
  // Narrow enough by then: the ordinary stop, not too noisy.
  const NextRound settled = next_round(rule(), 60, 31, estimate(0.05), false);
  EXPECT_TRUE(settled.stop);
  EXPECT_FALSE(settled.too_noisy);
  // The pair limit ends a noisy measurement too noisy as well.
  EXPECT_TRUE(next_round(rule(), 10000, 12, estimate(0.3), false).too_noisy);
  EXPECT_FALSE(next_round(rule(), 10000, 12, estimate(0.05), false).too_noisy);
}

TEST(StopRule, AnIntervalWhollyBelowTheSlowSpeedupIsPreciseEnoughWhateverItsWidth) {
  // 0.13x with an interval of 0.059..0.247 (+-71%: a program that starts a thread per call, on a
  // loaded two-core machine): its reward is at most 0.25, far below the reference's whatever the
  // noise, so it ends as the budget says, and keeps the signal that it is slow.
  const SpeedupEstimate slow{0.132, 0.059, 0.247};
  EXPECT_GT(slow.relative_half_width(), 0.5);
  EXPECT_TRUE(precise_enough(rule(), slow));
  const NextRound done = next_round(rule(), 69, 11, slow, false);
  EXPECT_TRUE(done.stop);
  EXPECT_FALSE(done.too_noisy);
  // Reaching up to the slow speedup, the same width is too wide.
  EXPECT_FALSE(precise_enough(rule(), {0.3, 0.1, 0.55}));
  EXPECT_TRUE(next_round(rule(), 60, 31, {0.3, 0.1, 0.55}, false).too_noisy);
  // The early stop of a clearly slow candidate is unchanged (its interval lies below 0.5).
  EXPECT_TRUE(next_round(rule(), 8, 11, slow, true).stop);
}

TEST(StopRule, AReMeasuresFixedPairsGoOnOnlyWhileItsIntervalIsTooWide) {
  StopRule fixed = rule();
  fixed.budget_seconds = 0;
  const NextRound done = next_round(fixed, 20, 2, estimate(0.05), false);
  EXPECT_TRUE(done.stop);
  EXPECT_EQ(done.reason, "pairs done");
  EXPECT_FALSE(next_round(fixed, 20, 2, estimate(0.3), false).stop);
  EXPECT_TRUE(next_round(fixed, 40, 31, estimate(0.3), false).too_noisy);
  // Too few pairs: on whatever the width.
  EXPECT_FALSE(next_round(fixed, 10, 2, estimate(0.05), false).stop);
}

TEST(StopRule, AReMeasureEndsNarrowEnoughToDisagreeByItsFactor) {
  EXPECT_DOUBLE_EQ(remeasure_max_relative_ci(0.1, 1.5), 0.1);
  // A looser noise limit would let an interval span more than the factor: capped at (f-1)/(f+1),
  // where (1+h)/(1-h) = f.
  EXPECT_DOUBLE_EQ(remeasure_max_relative_ci(0.5, 1.5), 0.2);
  EXPECT_DOUBLE_EQ(remeasure_max_relative_ci(0.5, 1.0), 0.0);
}

const DevicePeaks kH100{"H100", 3.35e12, 989e12};

// level2/080 at full scale: the task's estimate reads x (32 MiB) and the weight (256 MiB) and does
// a 1024 x 8192 x 8192 GEMM; every correct program must only write its [1024, 1] zeros.
RooflineWork level2_080() {
  return {4.0 * (1024 * 8192 + 8192.0 * 8192 + 8192 + 1024), 2.0 * 1024 * 8192 * 8192 + 1024 * 8192, 4.0 * 1024, 0};
}

TEST(RooflineGate, AProgramFasterThanTheEstimateButNotTheFloorGoesToTheStricterChecks) {
  // The provably-zero program of level2/080 at 5 us a call: 129x the reference, beyond the estimate
  // (111 us on an H100 with the margin), far above the floor of writing 4 KiB.
  const RooflineCheck zeros = roofline_check(5e-6, level2_080(), kH100, 1.25, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(zeros.passed) << zeros.detail;
  EXPECT_TRUE(zeros.beyond_estimate) << zeros.detail;
  EXPECT_NE(zeros.detail.find("the stricter checks decide"), std::string::npos) << zeros.detail;
  // The reference's own time: within the estimate, nothing more to check.
  const RooflineCheck gemm = roofline_check(600e-6, level2_080(), kH100, 1.25, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(gemm.passed);
  EXPECT_FALSE(gemm.beyond_estimate);
}

TEST(RooflineGate, FasterThanWritingItsOutputsAllowsFails) {
  // 1 GB of outputs at 3.35 TB/s with a 1.25 margin: 238.8 us at least.
  const RooflineWork relu{2e9, 0, 1e9, 0};
  const RooflineCheck fast = roofline_check(100e-6, relu, kH100, 1.25, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(fast.passed);
  EXPECT_FALSE(fast.beyond_estimate);
  EXPECT_NE(fast.detail.find("at least 239 us for what every correct program must do"), std::string::npos) << fast.detail;
  // Between the floor (238.8 us) and the estimate (477.6 us): passed, the stricter checks decide.
  const RooflineCheck between = roofline_check(300e-6, relu, kH100, 1.25, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(between.passed);
  EXPECT_TRUE(between.beyond_estimate);
  EXPECT_FALSE(roofline_check(500e-6, relu, kH100, 1.25, "NVIDIA H100 80GB HBM3").beyond_estimate);
  // A floor of operations declared by the task (1e15 at 989 TF/s take a second): 0.5 s is impossible.
  EXPECT_FALSE(roofline_check(0.5, {0, 2e15, 0, 1e15}, kH100, 1.25, "NVIDIA H100 80GB HBM3").passed);
}

TEST(RooflineGate, TheFloorIsTheOutputsOrTheSpecsDeclaredFloorWhicheverIsMore) {
  const std::string spec_text =
      "task: level1/001_scale\n"
      "category: elementwise\n"
      "inputs:\n"
      "  - {name: x, shape: [n], dtype: float32, init: randn}\n"
      "scales:\n"
      "  small: {n: 1000}\n"
      "flops: n\n"
      "bytes: 8 * n\n";
  const TaskSpec plain = parse_task_spec({true, spec_text, 1}, "t.crl");
  const RooflineWork w = roofline_work(plain, "small", 4000);
  EXPECT_DOUBLE_EQ(w.bytes, 8000);
  EXPECT_DOUBLE_EQ(w.flops, 1000);
  EXPECT_DOUBLE_EQ(w.floor_bytes, 4000);  // its outputs, written
  EXPECT_DOUBLE_EQ(w.floor_flops, 0);     // a correct program need compute nothing it can prove
  // Every correct program of this task must read x as well: the spec says so.
  const TaskSpec declared = parse_task_spec({true, spec_text + "floor: {bytes: 8 * n, flops: n}\n", 1}, "t.crl");
  EXPECT_DOUBLE_EQ(roofline_work(declared, "small", 4000).floor_bytes, 8000);
  EXPECT_DOUBLE_EQ(roofline_work(declared, "small", 4000).floor_flops, 1000);
}

TEST(RooflineGate, AnUnknownGpuSkipsTheGateAndSaysSo) {
  const RooflineCheck check = roofline_check(1e-9, {1e12, 1e15, 1e12, 0}, std::nullopt, 1.25, "Mystery GPU");
  EXPECT_TRUE(check.passed);
  EXPECT_FALSE(check.beyond_estimate);
  EXPECT_EQ(check.detail, "skipped: no peaks known for 'Mystery GPU'");
}

TEST(RooflineGate, AppliesOnTheGpuAndOnTheCpuOnlyWithPeaksGiven) {
  EvalOptions o;
  o.backend = Backend::cpu;
  EXPECT_FALSE(roofline_applies(o));
  o.peak_bytes_per_second = 1e10;
  EXPECT_FALSE(roofline_applies(o));  // both peaks, or the table's
  o.peak_flops_per_second = 1e11;
  EXPECT_TRUE(roofline_applies(o));
  o = EvalOptions{};
  o.backend = Backend::cuda;
  EXPECT_TRUE(roofline_applies(o));
}

TEST(StrictChecks, EveryKindOfInputTheJudgeMakesIsAmongTheStricterTrials) {
  int edges = 0, spread = 0, both = 0, ordinary = 0;
  for (int i = 0; i < 20; ++i) {
    const StrictTrialKind k = strict_trial_kind(i, true, true);
    edges += k.edges;
    spread += k.spread;
    both += k.edges && k.spread;
    ordinary += !k.edges && !k.spread;
  }
  EXPECT_EQ(edges, 10);
  EXPECT_EQ(spread, 6);
  EXPECT_GT(both, 0);
  EXPECT_GT(ordinary, 0);
  // A task without edges, or whose samples need not be scaled apart, gets none of those.
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(strict_trial_kind(i, false, true).edges);
    EXPECT_FALSE(strict_trial_kind(i, true, false).spread);
  }
}

TEST(Remeasure, IntervalsAgreeUnlessOneLiesWhollyAboveTheOtherByMoreThanTheFactor) {
  EXPECT_TRUE(intervals_agree({4, 3.8, 4.2}, {4.1, 3.9, 4.3}, 1.5));
  EXPECT_TRUE(intervals_agree({4, 3.8, 4.2}, {2, 1.9, 2.85}, 1.5));  // 3.8 / 2.85 = 1.33
  EXPECT_FALSE(intervals_agree({4, 3.8, 4.2}, {2, 1.9, 2.1}, 1.5));  // 3.8 / 2.1 = 1.81
  EXPECT_FALSE(intervals_agree({2, 1.9, 2.1}, {4, 3.8, 4.2}, 1.5));  // either way round
}

// Attack on the old rule: the 3.30x candidate re-measured at 0.10 with an interval of
// 0.069-3.70. The intervals overlap, so they "agree"; but that interval is +-1800%, far wider than
// a re-measure may end, so the stop rule measures on and, still that wide, ends it too noisy (the
// stage then calls it internal_error, never agreement). Its twin, a precise re-measure at 0.10,
// disagrees.
TEST(Remeasure, AReMeasureTooWideToDisagreeNeverCountsAsAgreement) {
  const SpeedupEstimate first{3.30, 3.10, 3.50}, noisy{0.10, 0.069, 3.70}, precise{0.10, 0.095, 0.105};
  EXPECT_TRUE(intervals_agree(first, noisy, 1.5));  // why agreement alone was not enough
  const double most = remeasure_max_relative_ci(0.1, 1.5);
  EXPECT_GT(noisy.relative_half_width(), most);
  StopRule re = rule();
  re.budget_seconds = 0;
  re.max_relative_ci = most;
  EXPECT_FALSE(next_round(re, 20, 2, noisy, false).stop);
  EXPECT_TRUE(next_round(re, 200, 31, noisy, false).too_noisy);
  EXPECT_LE(precise.relative_half_width(), most);
  EXPECT_TRUE(next_round(re, 20, 2, precise, false).stop);
  EXPECT_FALSE(intervals_agree(first, precise, 1.5));
}

}  // namespace
}  // namespace crl::eval
