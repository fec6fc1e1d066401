// crl starting mpirun for `crl run` by hand, with the user's stops forwarded as SIGUSR1 (job_launch.h).
#include "apps/crl/job_launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "apps/crl/commands.h"
#include "core/error.h"
#include "core/subprocess.h"
#include "rl/stop_request.h"

namespace crl::cli {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

std::atomic<pid_t> g_mpirun{0};
std::atomic<int> g_stops{0};        // stop signals received while mpirun runs
std::atomic<int> g_first_stop{0};   // the first of them
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

extern "C" void forward_stop(int signo) {
  int expected = 0;
  g_first_stop.compare_exchange_strong(expected, signo);
  const int earlier = g_stops.fetch_add(1);
  if (earlier == 0) {
    kill(g_mpirun.load(), SIGUSR1);  // forwarded by mpirun to every rank: a checkpointed stop
  } else if (signo != SIGUSR1) {
    kill(g_mpirun.load(), SIGTERM);  // asked again: mpirun SIGTERMs the ranks, which end at once
  }
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  return set;
}

[[noreturn]] void exec_mpirun(const std::vector<std::string>& argv, const sigset_t& unblock) {
  setpgid(0, 0);  // away from the terminal's process group: its Ctrl-C is this parent's to forward
  // A parent that dies (SIGKILL, a crash) stops the job as a stop signal would.
  prctl(PR_SET_PDEATHSIG, SIGUSR1);
  if (const int null = open("/dev/null", O_RDONLY); null >= 0) dup2(null, STDIN_FILENO);  // a background group must not read the tty
  for (int s : kStopSignals) signal(s, SIG_DFL);
  sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// What the user sees when a stop is forwarded (the handler itself may not log).
void log_stops(int* logged) {
  const int stops = g_stops.load();
  if (stops == *logged) return;
  if (*logged == 0) {
    spdlog::warn("{}: the ranks stop at the next step boundary and write a checkpoint (exit 5); a second SIGINT or SIGTERM ends "
                 "them at once (the rows flushed so far stay)",
                 rl::signal_name(g_first_stop.load()));
  }
  if (stops > 1 && *logged <= 1) spdlog::warn("asked again: ending the ranks at once");
  *logged = stops;
}

std::vector<std::string> mpirun_argv(const MpirunLaunch& launch) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) throw InputError("crl run needs mpirun (Open MPI): apt-get install openmpi-bin, or run tools/setup.sh");
  if (geteuid() == 0) {  // Open MPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  // Shared-memory messages above the eager size are copied through the shared segment, not read
  // across processes (CMA): in a container, the trainer's MPI_Probe and an evaluator's MPI_Send of
  // a verdict once hung there for minutes.
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  // The ranks learn that their stops come as SIGUSR1 through this process (cmd_run's warning).
  setenv("CRL_STOPS_FORWARDED", "1", 1);
  std::vector<std::string> argv = {mpirun, "-np", std::to_string(launch.ranks), "--oversubscribe", "--bind-to", "none", launch.self};
  argv.insert(argv.end(), launch.args.begin(), launch.args.end());
  return argv;
}

}  // namespace

int run_under_mpirun(const MpirunLaunch& launch) {
  const std::vector<std::string> argv = mpirun_argv(launch);
  // Stops wait (blocked) from here until the handlers that forward them know mpirun's pid.
  const sigset_t stops = stop_signal_set();
  sigset_t before;
  sigprocmask(SIG_BLOCK, &stops, &before);
  if (const int early = rl::stop_signal(); early != 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    spdlog::warn("stopped before the job started ({}): nothing to checkpoint; run the same command to start it", rl::signal_name(early));
    return kExitStopped;
  }
  spdlog::info("{}", fmt::join(argv, " "));
  const pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    throw ApiError("fork", "cannot start mpirun: fork failed");
  }
  if (pid == 0) exec_mpirun(argv, stops);
  setpgid(pid, pid);  // as the child does: whichever runs first
  g_mpirun = pid;
  struct sigaction forward {}, previous[std::size(kStopSignals)];
  forward.sa_handler = forward_stop;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &forward, &previous[i]);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  int status = 0, logged = 0;
  for (;;) {  // polled, so that a forwarded stop is logged when it happens
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    log_stops(&logged);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  log_stops(&logged);
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &previous[i], nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : kExitInternal;
}

}  // namespace crl::cli
