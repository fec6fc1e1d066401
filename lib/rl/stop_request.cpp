// The stop flag and its signal handlers (stop_request.h).
#include "rl/stop_request.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "core/error.h"

namespace crl::rl {
namespace {

constexpr int kStopSignals[] = {SIGUSR1, SIGTERM, SIGINT};

// Lock-free atomics are async-signal-safe; sig_atomic_t alone would not order the reads.
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_installed{false};  // by StopSignalHandlers
std::atomic<bool> g_installed_for_good{false};  // by install_stop_signal_handlers
static_assert(std::atomic<int>::is_always_lock_free);
struct sigaction g_previous[std::size(kStopSignals)];

extern "C" void on_stop_signal(int signo) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, signo)) return;
  // Asked again: SIGINT or SIGTERM end the process now; a repeated SIGUSR1 changes nothing.
  if (signo == SIGINT || signo == SIGTERM) _exit(128 + signo);
}

// False when a handler could not be installed (its signal named in *failed).
bool install_handlers(struct sigaction* previous, int* failed) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking read or wait goes on; the flag is read at the step boundary
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    if (sigaction(kStopSignals[i], &action, previous == nullptr ? nullptr : &previous[i]) != 0) {
      *failed = kStopSignals[i];
      return false;
    }
  }
  return true;
}

}  // namespace

int install_stop_signal_handlers() noexcept {
  if (g_installed.load() || g_installed_for_good.exchange(true)) return 0;
  int failed = 0;
  return install_handlers(nullptr, &failed) ? 0 : failed;
}

StopSignalHandlers::StopSignalHandlers() {
  if (g_installed_for_good.load()) throw Error("StopSignalHandlers beside install_stop_signal_handlers");
  if (g_installed.exchange(true)) throw Error("stop signal handlers are installed twice in one process");
  g_stop_signal = 0;
  int failed = 0;
  if (!install_handlers(g_previous, &failed)) throw Error(fmt::format("cannot install the handler of {}", signal_name(failed)));
}

StopSignalHandlers::~StopSignalHandlers() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

int stop_signal() { return g_stop_signal.load(); }

void request_stop(int signo) {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, signo);
}

std::string signal_name(int signo) {
  switch (signo) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return fmt::format("signal {}", signo);
  }
}

}  // namespace crl::rl
