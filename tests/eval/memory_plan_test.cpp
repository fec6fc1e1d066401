// The GPU memory plan (eval/memory_plan.h): the three processes' shares of a card per task.
#include "eval/memory_plan.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace crl::eval {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
// An H100 80 GB's and an H200's memory as CUDA reports them.
constexpr uint64_t kH100 = static_cast<uint64_t>(79.18 * kGiB);
constexpr uint64_t kH200 = static_cast<uint64_t>(139.8 * kGiB);
constexpr uint64_t kCacheLimit = 16 * kGiB;

double bytes(double fraction, uint64_t card) { return fraction * static_cast<double>(card); }

// level1/019 ReLU at full scale: 6 GiB in, 6 out, no temporaries, one slot.
TaskMemory relu(uint64_t card) { return {card, 6 * kGiB, 6 * kGiB, 6 * kGiB, 6 * kGiB, 1}; }
// level1/038 L1 norm at full scale: 8 GiB in, 8 out, abs(x) beside the output at the call's peak.
TaskMemory l1_norm(uint64_t card) { return {card, 8 * kGiB, 8 * kGiB, 16 * kGiB, 8 * kGiB, 1}; }

// Where each process's need fits the usual shares, they are kept (timings stay comparable with
// those measured under them): ReLU at full scale needs ~12.5 GiB in the judge and in the reference's
// worker and ~31 GiB for the candidate's guards.
TEST(MemoryPlan, AReluAtFullScaleKeepsTheUsualShares) {
  const MemoryPlan plan = plan_memory(relu(kH100), 0.95, kCacheLimit);
  EXPECT_FALSE(plan.take_turns);
  EXPECT_EQ(plan.judge, 0.25);
  EXPECT_EQ(plan.reference, 0.25);
  EXPECT_EQ(plan.candidate, 0.45);
  EXPECT_EQ(plan.judge_cache, kCacheLimit);  // (evicted when a request needs the room, as always)
  EXPECT_GE(bytes(plan.reference, kH100), plan.reference_worker_need);
  EXPECT_GE(bytes(plan.judge, kH100), plan.judge_need);
  EXPECT_GE(bytes(plan.candidate, kH100), plan.candidate_guard_need);
  EXPECT_GE(plan.candidate_guard_need, 6 * kGiB + 6 * kGiB + 3 * 6 * kGiB);  // arena, an input, three outputs
  EXPECT_EQ(plan_memory({kH100, 4 << 20, 4 << 20, 4 << 20, 64 << 20, 16}, 0.95, kCacheLimit).candidate, 0.45);
  // A candidate that runs out of its share is told how large it was.
  const std::string said = plan.candidate_share_said();
  EXPECT_NE(said.find("its share of this GPU for this task: 35.6 GiB of 79.2"), std::string::npos) << said;
}

// Outputs of 9 GiB: the candidate's guards need ~37 GiB, more than its usual 0.45 (35.6 GiB), while
// the three fit at once: each gets its need, the judge a cache from half of what is spare, the
// candidate the rest.
TEST(MemoryPlan, ATaskBeyondTheUsualSharesIsSizedByItsNeeds) {
  const TaskMemory task{kH100, 4 * kGiB, 9 * kGiB, 9 * kGiB, 4 * kGiB, 1};
  const MemoryPlan plan = plan_memory(task, 0.95, kCacheLimit);
  EXPECT_FALSE(plan.take_turns);
  EXPECT_GT(static_cast<double>(plan.candidate_guard_need), bytes(0.45, kH100));
  EXPECT_NEAR(plan.judge + plan.reference + plan.candidate, 0.95, 1e-6);
  EXPECT_GE(bytes(plan.reference, kH100), plan.reference_worker_need - 1.0);
  EXPECT_GE(bytes(plan.judge, kH100), plan.judge_need + static_cast<double>(plan.judge_cache) - 1.0);
  EXPECT_GE(bytes(plan.candidate, kH100), plan.candidate_guard_need);
  EXPECT_LT(plan.judge_cache, kCacheLimit);
}

TEST(MemoryPlan, AnL1NormOnAnH100TakesTurnsAndTheTimedPhaseStillFits) {
  const TaskMemory task = l1_norm(kH100);
  const MemoryPlan plan = plan_memory(task, 0.95, kCacheLimit);
  EXPECT_TRUE(plan.take_turns);
  EXPECT_EQ(plan.judge_cache, 0u);
  // The timed phase: the judge's run beside both workers' batches within the budget.
  EXPECT_LE(bytes(plan.judge, kH100) + bytes(plan.reference, kH100) + plan.reference_worker_need, bytes(0.95, kH100) + 1);
  EXPECT_GE(bytes(plan.judge, kH100), plan.judge_need);
  // The candidate's guards fit once the judge has handed its blocks back.
  EXPECT_GE(bytes(plan.candidate, kH100), plan.candidate_guard_need);
  EXPECT_NE(plan.describe().find("take turns"), std::string::npos) << plan.describe();
  // On an H200 the same task fits all three at once.
  EXPECT_FALSE(plan_memory(l1_norm(kH200), 0.95, kCacheLimit).take_turns);
}

TEST(MemoryPlan, ATaskTooLargeForTheCardIsCrlsLimitNamedWithItsFigures) {
  // 12 GiB in, 24 GiB at the call's peak: ~37 GiB each for the three at once, 111 GiB in all.
  const TaskMemory huge{kH100, 12 * kGiB, 12 * kGiB, 24 * kGiB, 12 * kGiB, 1};
  try {
    (void)plan_memory(huge, 0.95, kCacheLimit);
    ADD_FAILURE() << "a task needing ~100 GiB at once was planned on an 80 GB card";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not fit this GPU"), std::string::npos) << what;
    EXPECT_NE(what.find("crl's limit, not a program's"), std::string::npos) << what;
    EXPECT_NE(what.find("12.00 GiB of arguments, 24.00 GiB beyond them"), std::string::npos) << what;
  }
  TaskMemory on_h200 = huge;
  on_h200.card = kH200;
  EXPECT_NO_THROW((void)plan_memory(on_h200, 0.95, kCacheLimit));
}

TEST(MemoryPlan, SharesSetByHandAreKeptAndTheRestIsPlannedAroundThem) {
  const MemoryPlan all = plan_memory(relu(kH100), 0.95, kCacheLimit, {0.2, 0.3, 0.4});
  EXPECT_EQ(all.judge, 0.2);
  EXPECT_EQ(all.reference, 0.3);
  EXPECT_EQ(all.candidate, 0.4);
  EXPECT_EQ(all.judge_cache, kCacheLimit);
  const MemoryPlan one = plan_memory(relu(kH100), 0.95, kCacheLimit, {0, 0, 0.5});
  EXPECT_EQ(one.candidate, 0.5);
  // What the candidate does not take, the judge's cache may (here less than its limit).
  EXPECT_LT(one.judge_cache, kCacheLimit);
  EXPECT_NEAR(one.judge + one.reference + one.candidate, 0.95, 1e-6);
  // A fixed candidate share too small for the plan's others to fit is refused, not overcommitted.
  EXPECT_THROW((void)plan_memory(l1_norm(kH100), 0.95, kCacheLimit, {0, 0, 0.6}), Error);
}

}  // namespace
}  // namespace crl::eval
