// The trusted side of one task, kept across the evaluations of its candidates: the judge process
// (the reference compiled, run on every trial's inputs and held), the reference's timing worker, the
// secret and everything drawn from it, the input arenas and the timed batch's plan.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "eval/eval_options.h"
#include "eval/failure.h"
#include "eval/memory_plan.h"
#include "eval/secret_draws.h"
#include "eval/worker_pool.h"
#include "suite/suite.h"
#include "worker/protocol.h"

namespace crl::eval {

// Edge trials per task that declares edges (program/edge_inputs.h), after the ordinary trials.
constexpr int kEdgeTrials = 2;

class TaskJudge {
 public:
  // Compiles the task's reference, starts its judge and the reference's timing worker, runs the
  // reference on every trial's inputs, plans the timed batch and makes the arenas. Throws
  // InputError for bad input (an unknown scale) and Error when crl or the reference fails.
  static std::unique_ptr<TaskJudge> open(const Task& task, const EvalOptions& options, Compiler& compiler, WorkerPool& pool);
  ~TaskJudge();
  TaskJudge(const TaskJudge&) = delete;
  TaskJudge& operator=(const TaskJudge&) = delete;

  // CPU: once the reference's timing worker has timed an evaluation, the next evaluation gets a
  // fresh one (the judge and its arenas stay), so that no two evaluations share their reference's
  // process: a process's own pages and placement shift its times by a few percent for its whole
  // life, and one timing worker kept across a task's evaluations shifted all of them alike (the
  // reference judged against itself ten times read 1.03-1.11 on CI's machine; with `crl eval` of 10
  // copies here, six runs' geometric means spread 2.3% kept and 1.4% renewed, about what a run's
  // own noise gives). begin_reference_renewal starts the new worker as an evaluation opens (it loads
  // while the candidate compiles and runs its trials); ready_reference_worker, before timing, waits
  // for it and attaches its arena (throws Error as open() does). Off: EvalOptions::
  // renew_reference_worker. GPU: not yet (it would first drop the judge's mapping of the worker's
  // arena, DropArenaRequest, as replace_worker does for candidates; not run on a GPU); both do nothing.
  void begin_reference_renewal(const Task& task, const EvalOptions& options, WorkerPool& pool);
  void ready_reference_worker(const EvalOptions& options);
  bool reference_timed = false;  // the reference's timing worker has timed an evaluation (set by the timing stage)

  // Whether this judge serves `task` (and still runs).
  bool serves(const Task& task) const { return task_id == task.id && judge && judge->running(); }
  // Where a program worker of this task reads its spec and finds its arena.
  ProgramWorkerPlace candidate_place() const { return {task_dir, arena_fd}; }
  // The step the verdict opens with: what the judge holds and how to replay the evaluation.
  std::string describe() const;

  std::string task_id;
  std::string task_dir;  // absolute: the candidate's worker may read it (the task's spec)
  std::string library;   // the reference's
  uint64_t secret = 0;
  std::vector<uint64_t> seeds;       // the correctness trials'
  std::vector<uint64_t> edge_seeds;  // the edge trials' (tasks that declare edges)
  // What every call's arguments mix in (program/value_mix.h), as the judge's domain probe kept it;
  // the candidate's worker gets it with its load request (its guards make inputs from trial seeds).
  std::vector<uint32_t> value_mix;
  std::string values_described;  // for the judge step: what is mixed in, what the probe dropped
  // Why the trials have no float64 reference ("" when they have: the precision contract applies).
  std::string float64_missing;
  Precision precision = Precision::fp32;
  std::unique_ptr<WorkerProcess> judge;
  // The reference's timing worker: the same sandboxed worker as a candidate's, running the
  // reference on its own arena, so that both halves of a timed pair run in the same kind of
  // process, context and memory, and pay the same for everything but the program.
  std::unique_ptr<WorkerProcess> reference_worker;
  std::string device_name;                     // the judge's GPU ("NVIDIA H200"); empty on the CPU
  std::vector<worker::OutputMeta> outputs;     // the reference's (every seed gives the same shapes)
  std::vector<int64_t> output_bytes;
  bool spread = false;                         // the per-sample guard applies
  worker::ArenaLayout layout;
  // CPU backend: the arenas (the candidate's inputs, the reference worker's) and the output region
  // (candidate outputs, copied by this process out of the frozen worker), memfds the judge maps too.
  int arena_fd = -1;
  int reference_arena_fd = -1;
  int region_fd = -1;
  int staging_fd = -1;  // timed inputs before their turn: the judge fills it, no program worker maps it
  void* region = nullptr;
  // This process's mappings of the three arenas (turn pages included), to serve timed batches' turns.
  char* arena_map = nullptr;
  char* reference_arena_map = nullptr;
  char* staging_map = nullptr;
  uint64_t region_bytes = 0;
  double reference_call_us = 0;  // the reference's time per call as the judge timed it (0: not timed)
  MemoryPlan memory;  // GPU: the three processes' shares of the card for this task (memory_plan.h)
  int reference_threads = 0;     // the reference's timing worker's intra-op threads (0: not said)
  SecretDraws draws;
  // KernelBench's rule (EvalOptions::kernelbench_dir): the seed Model and every ModelNew are built
  // under, drawn from the secret; 0 under crl's rule.
  uint64_t kernelbench_seed = 0;
  std::string kernelbench_model;  // the checkout's module for the task (a .crl candidate's worker builds it too)
  bool timed_against_kernelbench = false;  // baseline kernelbench: the reference's timing worker runs Model

 private:
  TaskJudge() = default;
  // Starts the reference's timing worker and sends its load request (answered on the future's thread).
  std::future<Result<worker::LoadReply>> start_reference_worker(const Task& task, const EvalOptions& options, WorkerPool& pool);
  // Waits for that load, gives the worker its share of the GPU and its arena. Throws Error.
  void finish_reference_worker(std::future<Result<worker::LoadReply>>& loaded, const EvalOptions& options);
  std::future<Result<worker::LoadReply>> renewing_;  // a renewal begun, not yet ready
};

// The shares of the GPU the user fixed (EvalOptions; 0: planned).
FixedShares fixed_shares(const EvalOptions& options);

// The load request of a program worker or the judge.
worker::LoadRequest load_request(const Task& task, const EvalOptions& options, const std::string& library,
                                 double gpu_memory_fraction);

// Has a loaded program worker make its input arena and the judge map it as `owner`'s. CPU: both
// map the evaluator's memfd. GPU: the arena is the worker's own allocation, exported by its IPC
// handle, which the judge imports to fill and check it (timed kernels read memory of their own
// process: inputs in memory imported from the judge made level2/010's reference 2.1x slower in its
// worker, so copying them first faked a 1.86x speedup). A handle the judge refuses is the worker's
// failure (crash); the judge failing is crl's (internal_error).
std::optional<Failure> attach_arena(WorkerProcess& judge, WorkerProcess& worker, const worker::ArenaLayout& layout, bool cuda,
                                    worker::ArenaOwner owner, double timeout_seconds, const std::string& during);

}  // namespace crl::eval
