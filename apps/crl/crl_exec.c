/* build/apps/crl/crl: the command users type. It blocks SIGINT, SIGTERM and SIGUSR1, then execs
 * crl-main beside it (the program itself: every subcommand). A blocked signal survives exec as
 * pending, so one that comes while the dynamic loader maps and relocates LibTorch (a few hundred
 * milliseconds on a busy node) is not the default's death: crl-main's .preinit_array entry
 * (early_stop_handlers.cpp) installs `crl run`'s stop handlers, or leaves other subcommands the
 * defaults, and unblocks what this blocked. Static and libc-only, so that it starts at once.
 * CRL_STOPS_BLOCKED names the signals blocked here; CRL_SELF is this file, which crl-main starts
 * mpirun with, so that its ranks come through here too. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  (void)argc;
  static const int stops[] = {SIGINT, SIGTERM, SIGUSR1};
  sigset_t block, before;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; ++i) sigaddset(&block, stops[i]);
  sigprocmask(SIG_BLOCK, &block, &before);
  /* Only what this blocked is unblocked later: a caller's own mask stays. */
  char blocked[64] = "";
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; ++i) {
    if (sigismember(&before, stops[i])) continue;
    char one[16];
    snprintf(one, sizeof one, "%s%d", blocked[0] ? "," : "", stops[i]);
    strncat(blocked, one, sizeof blocked - strlen(blocked) - 1);
  }
  setenv("CRL_STOPS_BLOCKED", blocked, 1);
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || (size_t)n + sizeof "-main" > sizeof self) {
    fprintf(stderr, "crl: cannot read /proc/self/exe\n");
    return 4;
  }
  self[n] = '\0';
  setenv("CRL_SELF", self, 1);
  char program[PATH_MAX];
  snprintf(program, sizeof program, "%s-main", self);
  execv(program, argv);
  perror(program);
  sigprocmask(SIG_SETMASK, &before, NULL);
  return 4;
}
