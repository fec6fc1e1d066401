// Verdicts of programs the policy writes again (job key eval.reuse_verdicts): rank 0 keeps each
// judged program's verdict by task and program text, and a step's rollout whose program was judged
// before, or appears twice in the step, takes that verdict instead of going to an evaluator.
//
// Why: a policy that has learned a program writes it again and again; judging every copy costs the
// evaluators, and timing noise would give equal programs unequal rewards, which GRPO learns from.
// Verdicts that a second judgement could change (internal errors, timeouts) are not kept.
// Audits: the 1st, 2nd, 4th, 8th, ... copy of an `ok` verdict is judged again (log2 of the copies:
// dense while the policy starts to repeat a program, cheap once it has learnt it); a failure found
// (a hack caught, a mismatch) replaces the kept verdict for every copy from then on, so a program
// that cheats in few of its calls does not keep the verdict of the one judgement it escaped. A
// passing audit leaves the kept verdict (its speedup stays the reward: equal programs, equal
// rewards).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rl/dispatch.h"

namespace crl::rl {

class VerdictReuse {
 public:
  // The evaluators' side: verdicts of the items, by work_id.
  using Judge = std::function<std::map<int64_t, DispatchedVerdict>(const std::vector<WorkItem>&)>;

  explicit VerdictReuse(size_t max_programs = 100000) : max_programs_(max_programs) {}

  // The verdicts of `work` (work_id: the rollout id), judged in job step `step`: each program not
  // judged before goes to `judge` once; the other items get a copy of its verdict (evaluator rank
  // -1, 0 s, no logs or steps, a message that begins "the verdict of rollout N (step S)").
  std::map<int64_t, DispatchedVerdict> evaluate(std::vector<WorkItem> work, int64_t step, const Judge& judge);

  size_t programs() const { return judged_.size(); }  // verdicts kept (at most max_programs)
  size_t reused_last() const { return reused_last_; }   // items of the last call that took a copy
  size_t audits_last() const { return audits_last_; }   // items of the last call judged as audits

 private:
  struct Judged {
    eval::Verdict verdict;  // without logs and steps: those stay with the rollout judged
    int64_t rollout_id = 0;
    int64_t step = 0;
    int64_t copies = 0;  // rollouts that took it so far (audits at powers of two)
  };
  size_t max_programs_;
  std::map<std::string, Judged> judged_;  // key: hash of task and program text
  size_t reused_last_ = 0;
  size_t audits_last_ = 0;
};

}  // namespace crl::rl
