// The evaluation engine: compiles a candidate and judges it against the task's reference, as a
// pipeline of typed stages (lib/eval/stages: compile, load, trials, guards, timing, roofline gate,
// re-measure). Four processes: this one (orchestration, the clock), a trusted judge that runs only
// the reference and holds its outputs and inputs, a sandboxed worker that runs only the candidate,
// and one like it that runs only the reference for timing (both halves of a pair timed alike).
// Candidate code never shares a process with the reference, the timer or the comparison.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "eval/eval_options.h"
#include "eval/secret_draws.h"   // trial_seeds, timing_draw: what a replay draws
#include "eval/verdict.h"
#include "eval/worker_pool.h"    // find_worker_executable
#include "program/program_text.h"
#include "suite/suite.h"

namespace crl::eval {

class TaskJudge;
class Trace;
struct CandidateWorker;
struct Failure;
template <typename T>
class Result;

class Evaluator {
 public:
  Evaluator(EvalOptions options, Compiler& compiler);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Evaluates one candidate against a task. Whatever the candidate does (not compile, crash,
  // hang, return wrong values) ends in a Verdict; this throws only when crl itself or the
  // task's reference fails (compiler missing, reference does not run).
  Verdict evaluate(const Task& task, const ProgramText& candidate, const std::string& candidate_name);

  // Starts compiling a candidate on the compiler's pool and returns at once: a later evaluate() of
  // it finds it in the cache or joins the compile in flight.
  void compile_ahead(const Task& task, const ProgramText& candidate);

  struct Job {
    const Task* task;
    ProgramText program;
    std::string name;
  };
  // Evaluates the jobs in order while the next `ahead` of them compile on the pool, which
  // keeps the node's cores busy while one is timed (crl eval --compile-ahead). Compiles are
  // submitted in order, the judged job's first, so the FIFO pool never queues it behind later
  // ones. `before_each(i)` runs before job i (progress), `after_each(verdict)` as each is made
  // (crl eval --h5 appends and flushes it then).
  std::vector<Verdict> evaluate_all(const std::vector<Job>& jobs, size_t ahead,
                                    const std::function<void(size_t)>& before_each = {},
                                    const std::function<void(const Verdict&)>& after_each = {});

  const EvalOptions& options() const { return options_; }

 private:
  // The judge of `task`: the one held when it serves the task, else a new one (its failure is
  // crl's: internal_error, or InputError thrown for bad input).
  Result<TaskJudge*> judge_for(const Task& task, Trace& trace);
  // The verdict of a failed evaluation, or of a good one: its status, message and reward set, the
  // candidate's worker stopped and its log kept, a spare worker started for the next candidate.
  Verdict finish(Trace& trace, CandidateWorker& worker, const Failure& failure);
  Verdict finish_ok(Trace& trace, CandidateWorker& worker, std::string message);
  Verdict close(Trace& trace, CandidateWorker& worker);

  EvalOptions options_;
  Compiler& compiler_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<TaskJudge> judge_;
};

}  // namespace crl::eval
