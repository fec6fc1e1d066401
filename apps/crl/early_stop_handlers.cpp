// `crl run`'s stop handlers, installed before anything of the process runs (.preinit_array).
// Open MPI, srun and Slurm may signal a rank in its first second: a SIGUSR1 with its default
// action killed every rank then (exit 138), and LibTorch's static initialisers alone take a few
// hundred milliseconds before main. From here on a stop signal only sets the flag that the job
// reads at its first step boundary, or before its first step (rl/stop_request.h). What remains
// before this point is the dynamic loader's relocations (milliseconds).
#include <cstring>

#include "rl/stop_request.h"

namespace {

// The subcommand is the first argument that is no option (`crl --log-level debug run ...`).
bool is_run_command(int argc, char** argv) {
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) {
    if (std::strcmp(argv[i], "--log-level") == 0) {
      ++i;  // its value
      continue;
    }
    if (argv[i][0] == '-') continue;
    return std::strcmp(argv[i], "run") == 0;
  }
  return false;
}

// glibc calls .preinit_array entries with (argc, argv, envp), before any shared library's
// initialisers. A failure is left to run_job, which installs them again and says which failed.
void install_for_run(int argc, char** argv, char** /*envp*/) {
  if (is_run_command(argc, argv)) crl::rl::install_stop_signal_handlers();
}

}  // namespace

__attribute__((section(".preinit_array"), used)) void (*const crl_early_stop_handlers)(int, char**, char**) = install_for_run;
