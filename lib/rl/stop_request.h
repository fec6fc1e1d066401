// Stop requests of `crl run` (docs/training.md, "Stopping and resuming"): SIGUSR1, SIGTERM or
// SIGINT on a rank set an async-signal-safe flag that the job reads at its next step boundary,
// where the ranks agree on it, checkpoint and exit with kExitStopped (5). A second SIGINT or
// SIGTERM ends the process at once with 128 + its number (what is flushed stays on disk).
#pragma once

#include <string>

namespace crl::rl {

// Installs the handlers for SIGUSR1, SIGTERM and SIGINT for the rest of the process, keeping a
// stop already received. `crl run` calls it before main (apps/crl/early_stop_handlers.cpp), so that
// a stop during LibTorch's start-up or MPI_Init is kept, not the default's death; run_job calls it
// again (a no-op then) for other callers. Touches nothing that needs static initialisation.
// Returns 0, or the signal whose handler could not be installed.
int install_stop_signal_handlers() noexcept;

// Tests: installs the handlers while it lives, the flag cleared; restores the previous ones on
// destruction. One at a time per process, and not beside install_stop_signal_handlers (Error).
class StopSignalHandlers {
 public:
  StopSignalHandlers();
  ~StopSignalHandlers();
  StopSignalHandlers(const StopSignalHandlers&) = delete;
  StopSignalHandlers& operator=(const StopSignalHandlers&) = delete;
};

// The first stop signal received since the handlers were installed (its number), or 0.
int stop_signal();
// Sets the flag as a signal would (a rank told by another that the job stops; tests).
void request_stop(int signo);
// "SIGUSR1", "SIGTERM", "SIGINT"; "signal N" for others.
std::string signal_name(int signo);

}  // namespace crl::rl
