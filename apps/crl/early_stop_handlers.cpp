// `crl run`'s stop handlers, installed before anything of the process runs (.preinit_array).
// Open MPI, srun and Slurm may signal a rank in its first second: a SIGUSR1 with its default
// action killed every rank then (exit 138), and LibTorch's static initialisers alone take a few
// hundred milliseconds before main. From here on a stop signal only sets the flag that the job
// reads at its first step boundary, or before its first step (rl/stop_request.h). Before this
// point the dynamic loader maps and relocates LibTorch (0.2 s seen on a busy machine): started as
// build/apps/crl/crl (crl_exec.c), the stop signals were blocked across that, and are unblocked here.
#include <signal.h>
#include <stdlib.h>

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

// Unblocks the signals crl_exec.c blocked (CRL_STOPS_BLOCKED=2,15,10): a signal pending since then is
// delivered now, to `crl run`'s handler, or with its default action to other subcommands. getenv
// and unsetenv do not work yet (libc sets environ after .preinit_array): envp is read, and the
// variable taken out of it in place (the very array environ becomes), not to reach child processes.
void unblock_what_crl_exec_blocked(char** envp) {
  constexpr char kName[] = "CRL_STOPS_BLOCKED=";
  char** entry = envp;
  while (entry != nullptr && *entry != nullptr && std::strncmp(*entry, kName, sizeof kName - 1) != 0) ++entry;
  if (entry == nullptr || *entry == nullptr) return;
  sigset_t set;
  sigemptyset(&set);
  for (const char* p = *entry + sizeof kName - 1; *p != '\0';) {
    char* end = nullptr;
    const long signo = strtol(p, &end, 10);
    if (end == p) break;
    if (signo == SIGINT || signo == SIGTERM || signo == SIGUSR1) sigaddset(&set, static_cast<int>(signo));
    p = *end == ',' ? end + 1 : end;
  }
  for (char** e = entry; *e != nullptr; ++e) e[0] = e[1];
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

// glibc calls .preinit_array entries with (argc, argv, envp), before any shared library's
// initialisers. A failure is left to run_job, which installs them again and says which failed.
void install_for_run(int argc, char** argv, char** envp) {
  if (is_run_command(argc, argv)) crl::rl::install_stop_signal_handlers();
  unblock_what_crl_exec_blocked(envp);
}

}  // namespace

__attribute__((section(".preinit_array"), used)) void (*const crl_early_stop_handlers)(int, char**, char**) = install_for_run;
