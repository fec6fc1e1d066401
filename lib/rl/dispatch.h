// The job's programs to the evaluator ranks and their verdicts back, over dist's pull-based
// dispatch (dist/dispatch.h: who gets what, when; stop notes). This file is what the job puts in
// its messages: a program to judge (WorkItem, affine to its task, so an evaluator keeps the
// task's reference outputs) and the verdict it got (eval::to_json / verdict_from_json).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dist/dispatch.h"
#include "dist/group.h"
#include "eval/verdict.h"

namespace crl::rl {

struct WorkItem {
  int64_t work_id = 0;   // the caller's id (the rollout id)
  std::string task;
  std::string program;   // the program's text
  std::string name;      // for the verdict's `candidate`
};

struct DispatchedVerdict {
  eval::Verdict verdict;
  int evaluator_rank = -1;  // world rank
  double seconds = 0;       // evaluation time on the evaluator
};

// What the stop order that ends the evaluators' loop tells them.
struct StopNotice {
  std::string stopped;             // "stopped at crl step 7 (SIGUSR1); ..." (empty: the job ended)
  bool evaluation_failed = false;  // it stopped because evaluation failed (eval.max_failed_steps)
};

// Rank 0's side. Evaluators are world ranks [first_evaluator, world size).
class ProgramDispatcher {
 public:
  ProgramDispatcher(dist::Group world, int first_evaluator) : dispatcher_(world, first_evaluator) {}

  // Hands out every item and returns the verdicts by work id. Blocks until all are in.
  std::map<int64_t, DispatchedVerdict> evaluate(const std::vector<WorkItem>& items);
  // Tells every evaluator to stop. Call once, at the end.
  void stop_all(const StopNotice& notice = {});
  // The first stop signal an evaluator has noted so far, or 0.
  int take_stop_signal() { return dispatcher_.take_stop_signal(); }

 private:
  dist::Dispatcher dispatcher_;
};

// An evaluator rank's loop: requests work, evaluates it with `evaluate` (which returns a verdict
// for anything the candidate does; crl's own failures, thrown, become internal_error verdicts
// here), answers, until rank 0 says stop; returns what rank 0 said. `stop_signal` (polled while it
// waits for work, and after each program) returning non-zero sends rank 0 the stop note once.
StopNotice evaluator_loop(const dist::Group& world, const std::function<eval::Verdict(const WorkItem&)>& evaluate,
                          const std::function<int()>& stop_signal = {});

}  // namespace crl::rl
