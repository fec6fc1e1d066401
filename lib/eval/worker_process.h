// A sandboxed crl-worker child process: started by fork/exec with a private pipe pair for the
// protocol, stdout/stderr to a log file, a clean environment, resource limits and its own process
// group; the evaluator enforces every deadline and kills the whole group when one passes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "worker/worker_channel.h"

namespace crl::eval {

struct WorkerOptions {
  std::string executable;                  // the crl-worker binary (absolute path)
  std::vector<std::string> arguments;      // after the channel arguments the worker always gets
  std::string log_path;                    // stdout and stderr land here (truncated on start)
  std::map<std::string, std::string> environment;  // the child's whole environment
  uint64_t address_space_limit = 0;        // RLIMIT_AS in bytes, 0 for none (never on CUDA)
  uint64_t log_size_limit = 64ull << 20;   // RLIMIT_FSIZE: a worker that writes more is killed
  std::string working_dir;                 // empty: inherit
  // Descriptors of the evaluator's that the worker inherits, at these numbers (5, 6, ...): the
  // shared-memory arenas of the CPU backend. Everything else above 4 is closed.
  std::vector<int> inherited_fds;
  // Bytes the worker may hold in files under working_dir and in shared memory it created (memfds,
  // /dev/shm), checked every 200 ms while it runs; over it, the worker is killed. 0: unwatched.
  // Each file is limited by log_size_limit, but not their number, and a memfd's pages are outside
  // RLIMIT_AS: without the watch a program could fill the node's disk or memory.
  uint64_t storage_limit_bytes = 0;
  // The kernel's out-of-memory preference for the worker (/proc/self/oom_score_adj, -1000..1000;
  // 0 leaves the inherited one). Program workers get 1000: a program that exhausts the host's
  // memory (on the GPU backend nothing else bounds it) is the first process the kernel ends, not
  // the judge, the evaluator or a trainer beside it.
  int oom_score_adj = 0;
};

// How a worker ended.
struct WorkerExit {
  bool exited = false;     // it called exit(); exit_code holds the status
  int exit_code = 0;
  int signal = 0;          // the signal that ended it (SIGKILL when we killed it)
  bool killed_by_us = false;
  std::string reason;      // why we killed it, where it was not a deadline (the storage watch)
  std::string describe() const;  // "exited with code 3", "killed by signal 11 (Segmentation fault)"
};

// The GPU a worker sees, as its CUDA_VISIBLE_DEVICES: entry `gpu` of the evaluator's own list (an
// index, a GPU-UUID or a MIG id), or `gpu` itself where the evaluator's is unset; "-1" (no GPU) for
// gpu < 0, a worker of the CPU backend. A worker that saw every GPU of the node would run on the
// first, whichever its evaluator rank was given, and a program could spread its work over all of
// them. Throws InputError when the evaluator's list has no entry `gpu`.
std::string worker_visible_gpu(int gpu);

// The environment a worker gets: PATH, HOME and TMPDIR (a private folder), LANG=C,
// CUDA_VISIBLE_DEVICES=`visible_gpu` (worker_visible_gpu), and from the evaluator's own
// environment only what locating libraries and GPUs needs (LD_LIBRARY_PATH, CUDA_DEVICE_ORDER,
// CUDA_HOME, NVIDIA_VISIBLE_DEVICES, OMP_NUM_THREADS) and cuDNN's and cuBLASLt's logging switches
// (CUDNN_LOGLEVEL_DBG, CUDNN_LOGDEST_DBG, CUDNN_FRONTEND_LOG_*, CUBLASLT_LOG_*).
std::map<std::string, std::string> clean_worker_environment(const std::string& private_dir, const std::string& visible_gpu);

class WorkerProcess {
 public:
  // Starts the worker; throws ApiError when it cannot be started.
  explicit WorkerProcess(WorkerOptions options);
  ~WorkerProcess();  // kills the group if it still runs and removes the log file
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `request` and waits up to `timeout` for the reply. On ChannelTimeout the worker's group
  // is killed before the exception leaves; on ChannelClosed the worker is reaped. Either way
  // exit() then says how it ended. Malformed replies throw InputError (and kill the worker).
  nlohmann::json request(const nlohmann::json& request, std::chrono::milliseconds timeout);

  bool running() const { return running_; }
  // The worker's own folder (WorkerOptions::working_dir): a sandboxed worker writes only there.
  const std::string& working_dir() const { return options_.working_dir; }
  pid_t pid() const { return pid_; }
  // Kills the group (SIGKILL) if running and reaps the worker.
  void kill();
  // Asks it to quit, waits up to `grace`, then kills it.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Waits up to `grace` for a worker that said it will exit (its device context is lost), then
  // kills it; exit() then says how it ended.
  void await_exit(std::chrono::milliseconds grace) { reap(grace); }
  // Stops every thread of the worker (SIGSTOP to its group) and waits until it has stopped: a frozen
  // worker runs nothing on the CPU and submits nothing to a GPU, while the judge measures the
  // reference or reads the worker's outputs. request() thaws it first.
  void freeze();
  void thaw();
  bool frozen() const { return frozen_; }
  // The CPU time the worker's threads have used so far, those that ended too (its process CPU
  // clock), in seconds; -1 when it cannot be read (the worker is gone).
  double cpu_seconds() const;
  // The wall time the worker has spent not frozen so far (from before each SIGCONT to its confirmed
  // stop), in seconds: the most CPU time one of its threads can have used, what its CPU time over the
  // cores given is held to (a single thread finishing its reply after the judge's timer stopped is
  // inside this time, not beyond it).
  double thawed_seconds() const;
  // Valid once the worker is no longer running.
  const WorkerExit& exit() const { return exit_; }
  // The worker's stdout and stderr so far, cut to at most max_bytes (head and tail kept).
  std::string log(size_t max_bytes) const;

 private:
  void reap(std::chrono::milliseconds wait);
  void watch_storage(std::stop_token stop);
  void stop_watch();

  WorkerOptions options_;
  pid_t pid_ = -1;
  int request_fd_ = -1;  // we write requests here
  int reply_fd_ = -1;    // and read replies here
  bool running_ = false;
  bool frozen_ = false;
  std::chrono::steady_clock::time_point thawed_at_;  // when it was last thawed (or started)
  double thawed_before_ = 0;                          // seconds thawed until then
  WorkerExit exit_;
  // The storage watch: its thread, woken early to stop; what it saw when it killed the worker.
  std::mutex watch_mutex_;
  std::condition_variable_any watch_wake_;
  std::string storage_kill_reason_;
  std::vector<std::pair<dev_t, ino_t>> inherited_files_;  // the evaluator's arenas: not the worker's
  std::jthread watch_;
};

}  // namespace crl::eval
