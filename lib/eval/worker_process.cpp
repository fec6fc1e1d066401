// fork/exec of crl-worker with fds 3 (requests) and 4 (replies), rlimits, a clean environment,
// the parent's death taking the worker with it, and deadlines enforced by poll + SIGKILL.
#include "eval/worker_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/read_file.h"
#include "eval/verdict.h"
#include "worker/protocol.h"

namespace crl::eval {

std::string WorkerExit::describe() const {
  if (exited) return fmt::format("exited with code {}", exit_code);
  if (signal != 0) {
    if (!reason.empty()) return "killed by the evaluator: " + reason;
    return fmt::format("{} by signal {} ({})", killed_by_us ? "killed by the evaluator" : "killed", signal,
                       strsignal(signal));
  }
  return "still running";
}

std::string worker_visible_gpu(int gpu) {
  if (gpu < 0) return "-1";
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list == nullptr) return std::to_string(gpu);
  std::vector<std::string> entries;
  std::stringstream in(list);
  for (std::string entry; std::getline(in, entry, ',');) entries.push_back(entry);
  if (static_cast<size_t>(gpu) >= entries.size()) {
    throw InputError(fmt::format("GPU {} asked for, but this process sees {} (CUDA_VISIBLE_DEVICES={})", gpu, entries.size(), list));
  }
  return entries[static_cast<size_t>(gpu)];
}

std::map<std::string, std::string> clean_worker_environment(const std::string& private_dir, const std::string& visible_gpu) {
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", private_dir},
                                            {"TMPDIR", private_dir},
                                            {"LANG", "C"},
                                            {"CUDA_VISIBLE_DEVICES", visible_gpu}};
  // cuDNN's and cuBLASLt's own logging too, when the evaluator's user turned it on (for finding out
  // which engines a reference runs in its worker: tools/gpu-measure.sh cudnn); only that user sets it.
  // A site's switches that keep NVLink multicast off (shared GPU hosts set them for every process,
  // since a program using it can take the host's GPUs out of service) reach the workers as well.
  for (const char* name : {"LD_LIBRARY_PATH", "CUDA_DEVICE_ORDER", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES",
                           "OMP_NUM_THREADS", "CUDNN_LOGLEVEL_DBG", "CUDNN_LOGDEST_DBG", "CUDNN_FRONTEND_LOG_INFO",
                           "CUDNN_FRONTEND_LOG_FILE", "CUBLASLT_LOG_LEVEL", "CUBLASLT_LOG_FILE", "NCCL_NVLS_ENABLE",
                           "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return env;
}

WorkerProcess::WorkerProcess(WorkerOptions options) : options_(std::move(options)) {
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> argv_strings = {options_.executable, "--channel", "3,4"};
  argv_strings.insert(argv_strings.end(), options_.arguments.begin(), options_.arguments.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options_.environment) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int to_child[2];
  int from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) throw_api_error("OS", "pipe2", std::strerror(errno), __FILE__, __LINE__);
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    throw_api_error("OS", "pipe2", std::strerror(errno), __FILE__, __LINE__);
  }
  // Outputs (up to gigabytes) come back through from_child: a 1 MiB pipe buffer (the unprivileged
  // maximum) instead of 64 KiB cuts the context switches (bench_eval BM_ChannelTransfer: 0.65 ->
  // 1.13 GB/s here, 3 s runs). Best effort: a smaller system limit leaves the default.
  fcntl(from_child[0], F_SETPIPE_SZ, 1 << 20);
  const int log_fd = open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
    throw_io_error("cannot create the worker log", options_.log_path);
  }
  const std::string oom_text = std::to_string(options_.oom_score_adj);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], log_fd}) close(fd);
    throw_api_error("OS", "fork", std::strerror(errno), __FILE__, __LINE__);
  }
  if (pid_ == 0) {
    setpgid(0, 0);
    // No controlling terminal: the evaluator's, where it runs in one, would let the program read
    // what is typed there and make its own group the terminal's foreground, stopping crl's output.
    if (const int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); tty >= 0) {
      ioctl(tty, TIOCNOTTY);
      close(tty);
    }
    // A job's stop signal is for the ranks, not their workers: Slurm's scancel --signal reaches
    // every process of the step. The evaluator ends its workers itself (ignoring survives execve).
    signal(SIGUSR1, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);  // the evaluator died before prctl took effect
    // Move the channel ends above 4 first, so the dup2s below cannot clobber one another.
    const int req = fcntl(to_child[0], F_DUPFD, 64);
    const int rep = fcntl(from_child[1], F_DUPFD, 64);
    int moved_fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    for (size_t i = 0; i < options_.inherited_fds.size() && i < 8; ++i) {
      moved_fds[i] = fcntl(options_.inherited_fds[i], F_DUPFD, 64);
    }
    if (req < 0 || rep < 0 || dup2(req, 3) < 0 || dup2(rep, 4) < 0) _exit(126);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) _exit(126);
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) _exit(126);
    // The arenas land at 5, 6, ...; nothing else of the evaluator's (other workers' pipes, result
    // files) reaches the worker. (The arena fds were moved above every target number first.)
    for (size_t i = 0; i < options_.inherited_fds.size() && i < 8; ++i) {
      if (moved_fds[i] < 0 || dup2(moved_fds[i], static_cast<int>(5 + i)) < 0) _exit(126);
    }
    syscall(SYS_close_range, static_cast<unsigned>(5 + std::min<size_t>(options_.inherited_fds.size(), 8)), ~0u, 0u);
    if (options_.address_space_limit > 0) {
      const rlimit as{options_.address_space_limit, options_.address_space_limit};
      setrlimit(RLIMIT_AS, &as);
    }
    if (options_.log_size_limit > 0) {
      const rlimit fsize{options_.log_size_limit, options_.log_size_limit};
      setrlimit(RLIMIT_FSIZE, &fsize);
    }
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (options_.oom_score_adj != 0) {  // best effort (raising it needs no privilege; the text was made before fork)
      const int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
      if (oom >= 0) {
        (void)!write(oom, oom_text.data(), oom_text.size());
        close(oom);
      }
    }
    if (!options_.working_dir.empty() && chdir(options_.working_dir.c_str()) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);  // also here, so a kill cannot race the child's own setpgid
  close(to_child[0]);
  close(from_child[1]);
  close(log_fd);
  request_fd_ = to_child[1];
  reply_fd_ = from_child[0];
  running_ = true;
  thawed_at_ = std::chrono::steady_clock::now();
  if (options_.storage_limit_bytes > 0) {
    for (int fd : options_.inherited_fds) {
      struct stat st {};
      if (fstat(fd, &st) == 0) inherited_files_.emplace_back(st.st_dev, st.st_ino);
    }
    watch_ = std::jthread([this](std::stop_token stop) { watch_storage(stop); });
  }
}

namespace {

// Bytes allocated to the files under `dir` (blocks, not sizes: a sparse file costs what it holds).
uint64_t bytes_under(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, std::filesystem::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (lstat(it->path().c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace

void WorkerProcess::watch_storage(std::stop_token stop) {
  // The pid is safe to signal here: the worker is reaped (and its pid freed) only after this thread
  // has been joined (stop_watch()).
  const std::string fd_dir = fmt::format("/proc/{}/fd", pid_);
  std::unique_lock lock(watch_mutex_);
  while (!watch_wake_.wait_for(lock, stop, std::chrono::milliseconds(200), [] { return false; })) {
    if (stop.stop_requested()) return;
    const uint64_t files = options_.working_dir.empty() ? 0 : bytes_under(options_.working_dir);
    uint64_t shared = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(fd_dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code link_ec;
      const std::string target = std::filesystem::read_symlink(it->path(), link_ec).string();
      if (link_ec || (target.rfind("/memfd:", 0) != 0 && target.rfind("/dev/shm/", 0) != 0)) continue;
      struct stat st {};
      if (stat(it->path().c_str(), &st) != 0) continue;
      if (std::find(inherited_files_.begin(), inherited_files_.end(), std::make_pair(st.st_dev, st.st_ino)) !=
          inherited_files_.end()) {
        continue;
      }
      shared += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    if (files + shared > options_.storage_limit_bytes) {
      storage_kill_reason_ = fmt::format("it held {:.1f} MiB in files in its folder and {:.1f} MiB in shared memory it "
                                         "created (limit {} MiB together)",
                                         static_cast<double>(files) / (1 << 20), static_cast<double>(shared) / (1 << 20),
                                         options_.storage_limit_bytes >> 20);
      ::kill(-pid_, SIGKILL);
      return;
    }
  }
}

void WorkerProcess::stop_watch() {
  if (!watch_.joinable()) return;
  watch_.request_stop();
  watch_.join();
  if (!storage_kill_reason_.empty()) {
    exit_.killed_by_us = true;
    exit_.reason = storage_kill_reason_;
  }
}

WorkerProcess::~WorkerProcess() {
  kill();
  unlink(options_.log_path.c_str());  // the log is the worker's; callers copy what they keep
  if (request_fd_ >= 0) close(request_fd_);
  if (reply_fd_ >= 0) close(reply_fd_);
}

void WorkerProcess::reap(std::chrono::milliseconds wait) {
  if (!running_) return;
  stop_watch();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) {
      running_ = false;
      return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      exit_.killed_by_us = true;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(-pid_, SIGKILL);  // anything it left running in its group goes too
  running_ = false;
  exit_.exited = WIFEXITED(status);
  exit_.exit_code = exit_.exited ? WEXITSTATUS(status) : 0;
  exit_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

void WorkerProcess::kill() {
  if (!running_) return;
  ::kill(-pid_, SIGKILL);
  frozen_ = false;
  exit_.killed_by_us = true;
  reap(std::chrono::milliseconds(10000));
}

void WorkerProcess::stop(std::chrono::milliseconds grace) {
  if (!running_) return;
  thaw();
  try {
    worker::write_message(request_fd_, worker::encode_request(worker::QuitRequest{}));
  } catch (const Error&) {
    // Already gone: reap below says how it ended.
  }
  reap(grace);
}

void WorkerProcess::freeze() {
  if (!running_ || frozen_) return;
  ::kill(-pid_, SIGSTOP);
  // Wait until the kernel reports it stopped (or it died: reap() will say how).
  int status = 0;
  for (;;) {
    // Looked at without reaping first: a worker that died is reaped only after the storage watch
    // stopped, so that the watch never signals a pid the system has handed to another process.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WSTOPPED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (info.si_code != CLD_STOPPED) stop_watch();
    const pid_t r = waitpid(pid_, &status, WUNTRACED);
    if (r == pid_ && WIFSTOPPED(status)) break;
    if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
      running_ = false;
      exit_.exited = WIFEXITED(status);
      exit_.exit_code = exit_.exited ? WEXITSTATUS(status) : 0;
      exit_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      ::kill(-pid_, SIGKILL);
      return;
    }
    if (r < 0 && errno != EINTR) return;
  }
  frozen_ = true;
  thawed_before_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - thawed_at_).count();
}

double WorkerProcess::thawed_seconds() const {
  if (frozen_) return thawed_before_;
  return thawed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - thawed_at_).count();
}

double WorkerProcess::cpu_seconds() const {
  clockid_t clock = 0;
  timespec t{};
  if (!running_ || clock_getcpuclockid(pid_, &clock) != 0 || clock_gettime(clock, &t) != 0) return -1;
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void WorkerProcess::thaw() {
  if (!running_ || !frozen_) return;
  thawed_at_ = std::chrono::steady_clock::now();
  ::kill(-pid_, SIGCONT);
  frozen_ = false;
}

nlohmann::json WorkerProcess::request(const nlohmann::json& request, std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("worker {}", pid_);
  if (!running_) throw worker::ChannelClosed(what + " is not running (" + exit_.describe() + ")");
  thaw();
  try {
    worker::write_message(request_fd_, request);
    return worker::read_message(reply_fd_, std::chrono::steady_clock::now() + timeout, what);
  } catch (const worker::ChannelTimeout&) {
    kill();
    throw;
  } catch (const worker::ChannelClosed&) {
    // The worker is gone or going; give it a moment to finish dying so its status is known.
    reap(std::chrono::milliseconds(5000));
    throw;
  } catch (const InputError&) {
    kill();
    throw;
  }
}

std::string WorkerProcess::log(size_t max_bytes) const {
  // The log's size is bounded by the worker's file-size limit; a worker that never started left none.
  if (!std::filesystem::exists(options_.log_path)) return "";
  return truncate_log(read_file(options_.log_path, "worker log"), max_bytes);
}

}  // namespace crl::eval
