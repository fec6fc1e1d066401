// The evaluator's worker processes: where they run, what they may read, what they inherit.
#include "eval/worker_pool.h"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace crl::eval {
namespace {

bool file_is_executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string self_dir() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

}  // namespace

std::string find_worker_executable() {
  if (const char* env = std::getenv("CRL_WORKER"); env != nullptr && file_is_executable(env)) return env;
  const std::string dir = self_dir();
  for (const std::string& candidate : {dir + "/crl-worker", dir + "/../crl-worker/crl-worker"}) {
    if (file_is_executable(candidate)) return candidate;
  }
#ifdef CRL_WORKER_BUILD_PATH
  if (file_is_executable(CRL_WORKER_BUILD_PATH)) return CRL_WORKER_BUILD_PATH;
#endif
  throw Error("cannot find the crl-worker executable (set CRL_WORKER, or build the crl-worker target)");
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) throw_io_error("cannot resolve the path", path);
  std::string out = resolved;
  free(resolved);
  return out;
}

WorkerPool::WorkerPool(const EvalOptions& options, Compiler& compiler)
    : options_(options),
      compiler_(compiler),
      executable_(options.worker_executable.empty() ? find_worker_executable() : options.worker_executable),
      // A program of the CPU backend sees no GPU (it could otherwise do the work there).
      visible_gpu_(worker_visible_gpu(options.backend == Backend::cuda ? options.gpu : -1)),
      scratch_("crl-eval-", options.scratch_parent) {}

std::unique_ptr<WorkerProcess> WorkerPool::start_judge(std::vector<int> fds) {
  WorkerOptions w;
  w.executable = executable_;
  w.arguments = {"--role", "judge"};
  w.log_path = scratch_.file(fmt::format("judge-{}.log", started_++));
  w.environment = clean_worker_environment(scratch_.path(), visible_gpu_);
  w.working_dir = scratch_.path();
  w.inherited_fds = std::move(fds);
  return std::make_unique<WorkerProcess>(std::move(w));
}

std::unique_ptr<WorkerProcess> WorkerPool::start_program_worker(const std::string& kind, const ProgramWorkerPlace& place) {
  const std::string log_name = fmt::format("{}-{}.log", kind, started_++);
  WorkerOptions w;
  w.executable = executable_;
  w.arguments = {"--role", "candidate"};
  // Its own folder, the only one it may write; emptied when the worker goes (nothing it writes
  // survives its evaluation).
  const std::string dir = scratch_.file(log_name + ".d");
  std::filesystem::create_directories(dir);
  if (options_.sandbox) {
    w.arguments.insert(w.arguments.end(), {"--sandbox", dir});
    // It reads the task's folder (the spec) and its own folder, where its library is copied
    // (library_for), nothing else of ours: not the compile cache, whose other programs a candidate
    // could load and call (the task's reference, or a sibling candidate's faster program:
    // attacks/compiled_neighbours.cpu.crl), nor the cache's locks, which a reader could hold with
    // flock, stalling every compile on the node (attacks/compile_locks.cpu.crl).
    if (!place.task_dir.empty()) w.arguments.insert(w.arguments.end(), {"--read", place.task_dir});
  }
  w.log_path = scratch_.file(log_name);
  w.environment = clean_worker_environment(dir, visible_gpu_);
  if (options_.backend == Backend::cpu) w.address_space_limit = options_.cpu_address_space_limit;
  w.storage_limit_bytes = options_.worker_storage_bytes;
  w.oom_score_adj = 1000;  // out of host memory, the program's worker goes first (worker_process.h)
  w.working_dir = dir;
  if (place.arena_fd >= 0) w.inherited_fds = {place.arena_fd};
  return std::make_unique<WorkerProcess>(std::move(w));
}

std::string WorkerPool::library_for(const WorkerProcess& worker, const std::string& library, const std::string& file_name) const {
  if (!options_.sandbox) return library;
  // A copy, not a link: the worker may write in its folder, and a link would let a candidate write
  // into the cache's file that every later evaluation of the same program loads.
  const std::string copy = (std::filesystem::path(worker.working_dir()) / file_name).string();
  // A folder on a filesystem mounted noexec (a hardened /tmp) cannot hold a library to load.
  if (struct statvfs fs {}; statvfs(worker.working_dir().c_str(), &fs) == 0 && (fs.f_flag & ST_NOEXEC) != 0) {
    throw InputError(fmt::format("the evaluation's scratch folder {} is on a filesystem mounted noexec, so no program can be loaded "
                                 "from it: set TMPDIR to a folder where executables may be mapped",
                                 worker.working_dir()));
  }
  std::error_code error;
  std::filesystem::copy_file(library, copy, std::filesystem::copy_options::overwrite_existing, error);
  if (error) throw IoError(fmt::format("copying the compiled program {} into its worker's folder {}: {}", library, copy, error.message()));
  return copy;
}

std::unique_ptr<WorkerProcess> WorkerPool::take_candidate_worker(const ProgramWorkerPlace& place) {
  std::unique_ptr<WorkerProcess> worker = std::move(spare_);
  if (!worker || !worker->running()) worker = start_program_worker("candidate", place);
  return worker;
}

void WorkerPool::keep_spare(const ProgramWorkerPlace& place) {
  if (!spare_ || !spare_->running()) spare_ = start_program_worker("candidate", place);
}

}  // namespace crl::eval
