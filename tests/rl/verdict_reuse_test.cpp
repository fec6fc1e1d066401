// VerdictReuse (eval.reuse_verdicts) with a stand-in judge: each distinct program of a task is
// judged once, copies take its verdict and name the rollout judged, the same text for another task
// is judged anew, internal errors and timeouts are judged again, and audits (the 1st, 2nd, 4th, ...
// copy of an ok verdict) replace the kept verdict with a failure they find.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "rl/verdict_reuse.h"

namespace crl::rl {
namespace {

// Judges every item `ok` with a speedup that counts the calls, so a copy shows whose verdict it has.
class CountingJudge {
 public:
  eval::VerdictStatus status = eval::VerdictStatus::kOk;
  std::vector<int64_t> judged;  // work ids, in the order judged
  std::map<int64_t, DispatchedVerdict> operator()(const std::vector<WorkItem>& work) {
    std::map<int64_t, DispatchedVerdict> out;
    for (const WorkItem& w : work) {
      judged.push_back(w.work_id);
      DispatchedVerdict d;
      d.verdict.task_id = w.task;
      d.verdict.candidate = w.name;
      d.verdict.status = status;
      d.verdict.speedup = static_cast<double>(judged.size());
      d.verdict.message = fmt::format("judged as item {}", w.work_id);
      d.verdict.worker_log = "the worker's log";
      d.verdict.steps.push_back({"timing", true, "57 pairs", 0.1});
      d.evaluator_rank = 3;
      d.seconds = 1.5;
      out[w.work_id] = d;
    }
    return out;
  }
};

WorkItem item(int64_t id, const std::string& task, const std::string& program) {
  return {id, task, program, fmt::format("rollout {}", id)};
}

TEST(VerdictReuse, EqualProgramsInAStepAreJudgedOnceAndCopiesNameTheOneJudged) {
  VerdictReuse reuse;
  CountingJudge judge;
  const auto v = reuse.evaluate({item(10, "t", "A"), item(11, "t", "B"), item(12, "t", "A"), item(13, "u", "A")}, 4,
                                std::ref(judge));
  EXPECT_EQ(judge.judged, (std::vector<int64_t>{10, 11, 13}));  // "A" for task u is another program
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(reuse.reused_last(), 1u);
  const DispatchedVerdict& copy = v.at(12);
  EXPECT_EQ(copy.verdict.speedup, v.at(10).verdict.speedup);
  EXPECT_EQ(copy.verdict.candidate, "rollout 12");
  EXPECT_EQ(copy.verdict.message, "the verdict of rollout 10 (step 4), the same program for this task: judged as item 10");
  EXPECT_EQ(copy.evaluator_rank, -1);
  EXPECT_EQ(copy.seconds, 0);
  EXPECT_TRUE(copy.verdict.worker_log.empty());
  EXPECT_TRUE(copy.verdict.steps.empty());
  // The judged ones are as the judge returned them.
  EXPECT_EQ(v.at(10).evaluator_rank, 3);
  EXPECT_EQ(v.at(10).verdict.worker_log, "the worker's log");
  EXPECT_EQ(reuse.programs(), 3u);
}

TEST(VerdictReuse, AProgramJudgedBeforeIsJudgedAgainOnlyAtItsPowerOfTwoCopies) {
  VerdictReuse reuse;
  CountingJudge judge;
  reuse.evaluate({item(1, "t", "A")}, 0, std::ref(judge));
  std::map<int64_t, DispatchedVerdict> v;
  for (int64_t copy = 1; copy <= 9; ++copy) {  // rollouts 101..109, one per step, and a new program
    auto step = reuse.evaluate({item(100 + copy, "t", "A"), item(200 + copy, "t", "C" + std::to_string(copy))}, copy,
                               std::ref(judge));
    v.merge(step);
  }
  // Copies 1, 2, 4 and 8 are audits; the new programs are each judged once.
  EXPECT_EQ(judge.judged, (std::vector<int64_t>{1, 101, 201, 102, 202, 203, 104, 204, 205, 206, 207, 108, 208, 209}));
  EXPECT_EQ(v.at(103).verdict.speedup, 1);  // the first judgement's
  EXPECT_EQ(v.at(103).evaluator_rank, -1);
  EXPECT_EQ(v.at(103).verdict.message.rfind("the verdict of rollout 1 (step 0)", 0), 0u) << v.at(103).verdict.message;
  // A passing audit keeps the kept speedup (equal programs, equal rewards) and its evaluator's time.
  EXPECT_EQ(v.at(104).verdict.speedup, 1);
  EXPECT_EQ(v.at(104).evaluator_rank, 3);
  EXPECT_EQ(v.at(104).seconds, 1.5);
  EXPECT_EQ(v.at(104).verdict.message.rfind("audited again (ok); the verdict of rollout 1 (step 0)", 0), 0u)
      << v.at(104).verdict.message;
  EXPECT_EQ(reuse.reused_last(), 1u);  // the last step: rollout 109, a plain copy
  EXPECT_EQ(reuse.audits_last(), 0u);
}

TEST(VerdictReuse, AnAuditThatFindsAHackReplacesTheKeptVerdictForEveryCopy) {
  VerdictReuse reuse;
  CountingJudge judge;
  reuse.evaluate({item(1, "t", "A")}, 0, std::ref(judge));  // escaped the guards: ok
  judge.status = eval::VerdictStatus::kHack;                // caught when judged again
  // Copies 1 and 2 (both audits) and copy 3 (not one) in the same step.
  const auto v = reuse.evaluate({item(2, "t", "A"), item(3, "t", "A"), item(4, "t", "A")}, 1, std::ref(judge));
  EXPECT_EQ(judge.judged, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(reuse.audits_last(), 2u);
  EXPECT_EQ(v.at(2).verdict.status, eval::VerdictStatus::kHack);
  EXPECT_EQ(v.at(2).evaluator_rank, 3);  // its own judgement, logs and all
  EXPECT_EQ(v.at(2).verdict.worker_log, "the worker's log");
  EXPECT_EQ(v.at(3).verdict.status, eval::VerdictStatus::kHack);
  EXPECT_EQ(v.at(4).verdict.status, eval::VerdictStatus::kHack);  // the same step's copy takes the failure
  EXPECT_EQ(v.at(4).verdict.message.rfind("the verdict of rollout 2 (step 1)", 0), 0u) << v.at(4).verdict.message;
  // Later copies take the failure and are never audited again (a failure is kept).
  judge.status = eval::VerdictStatus::kOk;
  for (int64_t id = 5; id < 12; ++id) {
    EXPECT_EQ(reuse.evaluate({item(id, "t", "A")}, id, std::ref(judge)).at(id).verdict.status, eval::VerdictStatus::kHack);
  }
  EXPECT_EQ(judge.judged.size(), 3u);
}

TEST(VerdictReuse, InternalErrorsAndTimeoutsAreJudgedAgain) {
  for (const auto status : {eval::VerdictStatus::kInternalError, eval::VerdictStatus::kTimeout}) {
    VerdictReuse reuse;
    CountingJudge judge;
    judge.status = status;
    reuse.evaluate({item(1, "t", "A")}, 0, std::ref(judge));
    judge.status = eval::VerdictStatus::kOk;
    const auto v = reuse.evaluate({item(2, "t", "A")}, 1, std::ref(judge));
    EXPECT_EQ(judge.judged, (std::vector<int64_t>{1, 2})) << eval::to_string(status);
    EXPECT_EQ(v.at(2).verdict.status, eval::VerdictStatus::kOk);
    EXPECT_EQ(reuse.reused_last(), 0u);
  }
  // A hack is a property of the program: kept.
  VerdictReuse reuse;
  CountingJudge judge;
  judge.status = eval::VerdictStatus::kHack;
  reuse.evaluate({item(1, "t", "A")}, 0, std::ref(judge));
  EXPECT_EQ(reuse.evaluate({item(2, "t", "A")}, 1, std::ref(judge)).at(2).verdict.status, eval::VerdictStatus::kHack);
  EXPECT_EQ(judge.judged.size(), 1u);
}

TEST(VerdictReuse, BeyondItsBoundItJudgesNewProgramsWithoutKeepingThem) {
  VerdictReuse reuse(2);
  CountingJudge judge;
  reuse.evaluate({item(1, "t", "A"), item(2, "t", "B"), item(3, "t", "C")}, 0, std::ref(judge));
  EXPECT_EQ(reuse.programs(), 2u);
  reuse.evaluate({item(4, "t", "C"), item(5, "t", "A")}, 1, std::ref(judge));
  EXPECT_EQ(judge.judged, (std::vector<int64_t>{1, 2, 3, 4, 5}));  // C was not kept; A was (5: its first audit)
  reuse.evaluate({item(6, "t", "C"), item(7, "t", "A")}, 2, std::ref(judge));
  EXPECT_EQ(judge.judged.back(), 7);  // A's second copy: an audit too
  reuse.evaluate({item(8, "t", "A")}, 3, std::ref(judge));
  EXPECT_EQ(judge.judged.back(), 7);  // its third: a copy
}

}  // namespace
}  // namespace crl::rl
