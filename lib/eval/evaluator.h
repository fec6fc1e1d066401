// The evaluation engine: compiles a candidate and judges it against the task's reference. Four
// processes: this one (orchestration, the clock), a trusted judge that runs only the reference
// and holds its outputs and inputs, a sandboxed worker that runs only the candidate, and one like
// it that runs only the reference for timing (both halves of a pair timed alike).
// Candidate code never shares a process with the reference, the timer or the comparison.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "eval/output_comparison.h"
#include "eval/verdict.h"
#include "eval/worker_process.h"
#include "suite/suite.h"

namespace crl::eval {

struct EvalOptions {
  Backend backend = Backend::cpu;
  std::string scale = "small";
  int trials = 5;                       // correctness trials, each on inputs from a new seed
  uint64_t seed = 0;                    // 0: a fresh secret per judged task; else trial and timing
                                        // seeds derive from it (replays an evaluation exactly)
  bool timing = true;                   // false: stop after the correctness trials
  std::string baseline = "eager";       // the reference as timed: "eager" (called), or "cuda_graph"
                                        // (each slot's call captured once and replayed; CUDA only)
  double time_budget_seconds = 10;      // timing stops when it is spent ...
  double target_relative_ci = 0.01;     // ... or when the speedup's 95% CI is within +-1%
  int min_timed_pairs = 20;
  // ... but once the budget is spent, a candidate whose speedup's 95% CI lies wholly below
  // slow_stop_speedup stops after min_timed_pairs_when_slow pairs (a program of seconds per call
  // would otherwise take min_timed_pairs x that; its reward is known well enough).
  int min_timed_pairs_when_slow = 5;
  double slow_stop_speedup = 0.5;
  int max_timed_pairs = 10000;
  int pairs_per_round = 10;             // timed pairs per request to the worker (first round)
  int warmup_calls = 3;
  double call_timeout_seconds = 60;     // one correctness trial (both programs run once)
  double load_timeout_seconds = 180;    // a worker's start: loading LibTorch and the libraries
  uint64_t cpu_address_space_limit = 0; // RLIMIT_AS of CPU workers; 0: half the RAM + 16 GiB
  uint64_t worker_storage_bytes = 1ull << 30;  // files in a worker's folder plus memfds it made; 0: unwatched
  // Which of the evaluator's GPUs (an index into what it sees) the judge and the program workers
  // use; they see that one alone (CUDA_VISIBLE_DEVICES). The job: the evaluator rank's own GPU.
  int gpu = 0;
  double gpu_memory_fraction = 0.6;     // candidate worker's share of the GPU's memory
  double judge_gpu_memory_fraction = 0.3;  // the judge's (its cached outputs are let go when a request needs more)
  int cpu_threads = 0;                  // intra-op threads of CPU workers; 0: LibTorch's default
  size_t max_log_bytes = 8192;          // compile and worker logs kept in a verdict
  std::string worker_executable;        // empty: find_worker_executable()
  std::string scratch_parent;           // where per-evaluation folders go; empty: $TMPDIR
  // Hack guards (docs/hack-guards.md).
  bool hack_guards = true;              // false only in tests of the guards themselves
  double guard_settle_seconds = 0.05;   // wait before outputs are looked at again (deferred work)
  double remeasure_above_speedup = 3;   // speedups above this are re-measured in a fresh worker, by
  double remeasure_max_disagreement = 1.5;  // single calls; intervals more than this apart: a hack
  // The candidate's timed calls in a fresh worker (started during the trials) instead of the one
  // that ran its trials and guards, so that both timing workers have the same history.
  bool fresh_timing_worker = false;
  // The judge (docs/evaluation.md).
  bool sandbox = true;                  // seccomp and Landlock around the candidate's worker
  uint64_t arena_bytes = uint64_t{16} << 30;        // the candidate's input slots, at most
  uint64_t judge_cache_bytes = uint64_t{16} << 30;  // reference outputs the judge keeps per task
  int max_slots = 64;                   // inputs per timed batch to exceed the caches (fresh values in each)
  // A timed batch has enough slots (calls) for the reference's calls to take this long, so that a
  // request's fixed cost (waking the worker, the GPU's switch between processes' contexts,
  // describing the outputs) is a small part of what is timed; within max_batch_calls, arena_bytes and
  // batch_output_bytes. < 0 (the default; the Evaluator resolves it): 5000 on the GPU (there a request's fixed cost was ~400 us, as long as
  // the calls of a 256 MiB ReLU pair, and moved the speedup of a program against itself by
  // +-10% from one evaluation to the next), 0 on the CPU.
  double min_batch_us = -1;
  int max_batch_calls = 512;            // slots per timed batch for min_batch_us, at most
  uint64_t batch_output_bytes = uint64_t{4} << 30;  // outputs a timed batch holds (each program's)
  double idle_slack_us = 50;            // the GPU is idle when the probe takes <= 1.5 x baseline + this
  double idle_wait_seconds = 60;        // a timed batch waits this long for an idle GPU (a trainer's step
                                        // on a shared GPU), then the measurement fails (internal_error)
  double roofline_margin = 1.25;        // hack:beyond_roofline below the least time / this (GPU only)
  double peak_bytes_per_second = 0;     // the GPU's peaks for the gate; 0: roofline.h's table by
  double peak_flops_per_second = 0;     // device name (both must be set to override it)
};

// crl-worker's path: $CRL_WORKER, else next to the running executable (or in ../crl-worker/),
// else the one this build made. Throws Error when none exists.
std::string find_worker_executable();

// Seeds of the correctness trials of a task under a secret (EvalOptions::seed, or the judge's).
std::vector<uint64_t> trial_seeds(uint64_t secret, int trials, const std::string& task_id);

// The `index`-th draw of a task's timing under a secret (60 bits): its slots' input seeds, each
// pair's order and checked slot, in the order the evaluator makes them. Whoever knows the secret
// knows them all, so the secret must be fresh where candidates are judged for a reward (the job
// draws one per judged task); EvalOptions::seed is for replaying an evaluation.
uint64_t timing_draw(uint64_t secret, const std::string& task_id, uint64_t index);

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
  struct JudgeState;
  JudgeState& judge_for(const Task& task);
  std::unique_ptr<WorkerProcess> start_candidate_worker(const std::string& log_name);
  // A sandboxed worker of the candidate role (candidates, and the reference's timing worker).
  std::unique_ptr<WorkerProcess> start_program_worker(const std::string& log_name, const std::string& task_dir, int arena_fd);
  nlohmann::json load_request(const Task& task, const std::string& library, const std::string& library_key,
                              double gpu_memory_fraction) const;

  EvalOptions options_;
  Compiler& compiler_;
  std::string worker_executable_;
  std::string visible_gpu_;  // every worker's CUDA_VISIBLE_DEVICES (worker_visible_gpu)
  std::unique_ptr<class ScratchDir> scratch_;
  std::unique_ptr<JudgeState> judge_;
  // A candidate worker started at the end of the previous evaluation: it loads LibTorch while
  // the next candidate compiles, not while anything is timed.
  std::unique_ptr<WorkerProcess> spare_;
  int workers_started_ = 0;
};

}  // namespace crl::eval
