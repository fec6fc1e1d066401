// What an evaluation does and within which limits: the options of crl eval and of the job's
// evaluators (docs/evaluation.md explains each guard and limit).
#pragma once

#include <cstdint>
#include <string>

#include "compile/compiler.h"  // Backend
#include "program/run_settings.h"  // Precision

namespace crl::eval {

struct EvalOptions {
  Backend backend = Backend::cpu;
  std::string scale = "small";
  int trials = 5;                       // correctness trials, each on inputs from a new seed
  uint64_t seed = 0;                    // 0: a fresh secret per judged task; else trial and timing
                                        // seeds derive from it (replays an evaluation exactly)
  bool timing = true;                   // false: stop after the correctness trials
  std::string baseline = "eager";       // the reference as timed: "eager" (called), or "cuda_graph"
                                        // (each slot's call captured once and replayed; CUDA only), or
                                        // "kernelbench" (the checkout's Model from Python, as KernelBench
                                        // times it; needs kernelbench_dir; outputs still judged by crl's)
  // A KernelBench checkout: KernelBench's rule for parameters (docs/evaluation.md, "Parameters"):
  // every call's params hold the values of the task's Model built under one secret seed, and a
  // KernelBench-format candidate's ModelNew, built under the same seed, keeps its own. "": crl's
  // rule (fresh secret values for every call, given to a ModelNew's tensors by order and shape).
  std::string kernelbench_dir;
  // The float32 math allowed (program/run_settings.h): fp32, or tf32 (opted in: every worker,
  // the reference's too, may use TF32, and the precision contract's bound follows the reference's).
  Precision precision = Precision::fp32;
  double time_budget_seconds = 10;      // timing stops when it is spent ...
  double target_relative_ci = 0.01;     // ... or when the speedup's 95% CI is within +-1%
  int min_timed_pairs = 20;
  // ... but once the budget is spent, a candidate whose speedup's 95% CI lies wholly below
  // slow_stop_speedup stops after min_timed_pairs_when_slow pairs (a program of seconds per call
  // would otherwise take min_timed_pairs x that; its reward is known well enough).
  int min_timed_pairs_when_slow = 5;
  double slow_stop_speedup = 0.5;
  int max_timed_pairs = 10000;
  // No measurement is rewarded whose speedup's 95% interval is wider than +-max_relative_ci (relative
  // half width) once its budget is spent: it is measured on, up to noisy_budget_factor x the time
  // budget in all, and still wider then it is internal_error (machine too noisy). The re-measure
  // ends no wider either (narrower where remeasure_max_disagreement needs it), so a noisy re-measure
  // never counts as agreement. docs/evaluation.md, "Reward", says why these values.
  double max_relative_ci = 0.1;
  double noisy_budget_factor = 3;
  int pairs_per_round = 10;             // timed pairs per request to the worker (first round)
  int warmup_calls = 3;
  double call_timeout_seconds = 60;     // one correctness trial (both programs run once)
  double load_timeout_seconds = 180;    // a worker's start: loading LibTorch and the libraries
  uint64_t cpu_address_space_limit = 0; // RLIMIT_AS of CPU workers; 0: half the RAM + 16 GiB
  uint64_t worker_storage_bytes = 1ull << 30;  // files in a worker's folder plus memfds it made; 0: unwatched
  // Which of the evaluator's GPUs (an index into what it sees) the judge and the program workers
  // use; they see that one alone (CUDA_VISIBLE_DEVICES). The job: the evaluator rank's own GPU.
  int gpu = 0;
  // One budget of the GPU's memory for the evaluation's three processes, a fraction of the card (the
  // rest is left to their CUDA contexts), shared per task by eval/memory_plan.h from the reference's
  // measured call (docs/evaluation.md, "GPU memory"). A share set here (> 0, a fraction of the card,
  // the arena counted in a worker's) is that process's whatever the task; 0: planned.
  double gpu_memory_budget = 0.95;
  double gpu_memory_fraction = 0;            // the candidate's worker
  double reference_gpu_memory_fraction = 0;  // the reference's timing worker
  double judge_gpu_memory_fraction = 0;      // the judge (its cached outputs are let go when a request needs more)
  int cpu_threads = 0;                  // intra-op threads of CPU workers; 0: LibTorch's default
  size_t max_log_bytes = 8192;          // compile and worker logs kept in a verdict
  std::string worker_executable;        // empty: find_worker_executable()
  std::string scratch_parent;           // where per-evaluation folders go; empty: $TMPDIR
  // Hack guards (docs/hack-guards.md).
  bool hack_guards = true;              // false only in tests of the guards themselves
  double guard_settle_seconds = 0.05;   // wait before outputs are looked at again (deferred work)
  double remeasure_above_speedup = 3;   // speedups above this are re-measured in a fresh worker, by
  double remeasure_max_disagreement = 1.5;  // single calls; intervals more than this apart: a hack
  // The judge (docs/evaluation.md).
  bool sandbox = true;                  // seccomp and Landlock around the candidate's worker
  uint64_t arena_bytes = uint64_t{16} << 30;        // the candidate's input slots, at most
  uint64_t judge_cache_bytes = uint64_t{16} << 30;  // reference outputs the judge keeps per task
  int max_slots = 64;                   // inputs per timed batch to exceed the caches (fresh values in each)
  // CPU backend: a timed batch's calls take turns (worker/call_turns.h): each call's inputs reach
  // the arena only after the call before it returned, so no call sees a later call's inputs or
  // leaves its work to a later call. Opt-in (`crl eval --call-turns`): precise on a quiet machine,
  // but on CI's loaded 2 cores (a job's ranks busy-polling beside other tests) the per-call
  // handshakes made jobs' planted programs too noisy to reward (docs/evaluation.md). Not on the GPU.
  bool call_turns = false;
  // CPU backend: a fresh reference timing worker for every evaluation that times (TaskJudge::
  // begin_reference_renewal), so that no two evaluations of a task share the reference's process.
  // It costs a worker start per evaluation (~0.25 s of CPU); the tests' quick options turn it off
  // but in the self-judgement test, which checks it (CI's suite judges hundreds of evaluations).
  bool renew_reference_worker = true;
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
  double roofline_margin = 1.25;        // the roofline gate's slack on the least times (GPU; CPU with peaks given)
  int strict_trials = 20;               // trials more for a candidate faster than its task's estimate
  double peak_bytes_per_second = 0;     // the GPU's peaks for the gate; 0: roofline.h's table by
  double peak_flops_per_second = 0;     // device name (both must be set to override it)
};

// The rule the parameters are given by, as verdicts and results files name it: "crl" (fresh secret
// values every call) or "kernelbench" (KernelBench's Model under one seed: kernelbench_dir).
inline const char* params_rule_name(const EvalOptions& options) { return options.kernelbench_dir.empty() ? "crl" : "kernelbench"; }

}  // namespace crl::eval
