// Starts the evaluator's worker processes, each with its log in the evaluator's scratch folder: a
// task's judge (trusted, unsandboxed), and program workers (sandboxed: a candidate's, the
// reference's timing worker, a re-measure's). One candidate worker is kept spare, started at the
// end of an evaluation, so that it loads LibTorch while the next candidate compiles.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "eval/eval_options.h"
#include "eval/scratch_dir.h"
#include "eval/worker_process.h"

namespace crl::eval {

// crl-worker's path: $CRL_WORKER, else next to the running executable (or in ../crl-worker/),
// else the one this build made. Throws Error when none exists.
std::string find_worker_executable();

// Workers start in their private folder, so every path they are given must be absolute.
std::string absolute_path(const std::string& path);

// Where a program worker reads its task's spec and the input arena it inherits (CPU: a memfd).
struct ProgramWorkerPlace {
  std::string task_dir;  // absolute; "" for none
  int arena_fd = -1;
};

class WorkerPool {
 public:
  // `options` must outlive the pool.
  WorkerPool(const EvalOptions& options, Compiler& compiler);
  // The judge of a task; it inherits `fds` (the CPU backend's arenas and output region).
  std::unique_ptr<WorkerProcess> start_judge(std::vector<int> fds);
  // A sandboxed program worker; its log is named <kind>-<n>.log.
  std::unique_ptr<WorkerProcess> start_program_worker(const std::string& kind, const ProgramWorkerPlace& place);
  // The path `worker` loads `library` from: with the sandbox, a copy in the worker's own folder (it
  // reads nothing of the compile cache, where the task's reference and the other candidates lie);
  // without, the library itself.
  std::string library_for(const WorkerProcess& worker, const std::string& library, const std::string& file_name = "program.so") const;
  // The spare candidate worker when it runs, else a new one.
  std::unique_ptr<WorkerProcess> take_candidate_worker(const ProgramWorkerPlace& place);
  // Starts a spare candidate worker unless one runs.
  void keep_spare(const ProgramWorkerPlace& place);
  // A spare inherits a task's arena: a new task's judge drops it.
  void drop_spare() { spare_.reset(); }

 private:
  const EvalOptions& options_;
  Compiler& compiler_;
  std::string executable_;
  std::string visible_gpu_;  // every worker's CUDA_VISIBLE_DEVICES (worker_visible_gpu)
  ScratchDir scratch_;
  std::unique_ptr<WorkerProcess> spare_;
  int started_ = 0;
};

}  // namespace crl::eval
