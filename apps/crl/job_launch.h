// `crl run` started by hand (no mpirun or srun around it): crl starts mpirun itself and stands
// between it and the user's signals, so that a stop keeps the job's work (docs/training.md,
// "Stopping and resuming").
#pragma once

#include <string>
#include <vector>

namespace crl::cli {

struct MpirunLaunch {
  std::string self;               // this crl executable, which mpirun starts on every rank
  int ranks = 2;                  // mpirun -np
  std::vector<std::string> args;  // the ranks' arguments after the executable ("run", JOB.yaml, options)
};

// Runs `mpirun -np N self args...` in its own process group (so a terminal's Ctrl-C reaches this
// process alone) and waits for it. The first SIGINT, SIGTERM or SIGUSR1 here (or one received since
// the process began) goes to mpirun as SIGUSR1, which Open MPI passes to the ranks: they stop at
// the next step boundary with a checkpoint (exit 5). On SIGINT or SIGTERM mpirun itself would
// SIGTERM the ranks and SIGKILL them a second later, long before a step ends. A second SIGINT or
// SIGTERM goes to mpirun as SIGTERM: the ranks end at once. If this process dies, mpirun gets
// SIGUSR1. Returns mpirun's exit code (128 + N when a signal ended it); 5 without starting mpirun
// when a stop came first.
int run_under_mpirun(const MpirunLaunch& launch);

}  // namespace crl::cli
