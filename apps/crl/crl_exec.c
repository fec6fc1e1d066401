/* build/apps/crl/crl: the command users type. It blocks SIGINT, SIGTERM and SIGUSR1, then execs
 * crl-main beside it (the program itself: every subcommand). A blocked signal survives exec as
 * pending, so one that comes while the dynamic loader maps and relocates LibTorch (a few hundred
 * milliseconds on a busy node) is not the default's death: crl-main's .preinit_array entry
 * (early_stop_handlers.cpp) installs `crl run`'s stop handlers, or leaves other subcommands the
 * defaults, and unblocks what this blocked. Static and libc-only, so that it starts at once.
 * CRL_STOPS_BLOCKED names the signals blocked here; CRL_SELF is this file, which crl-main starts
 * mpirun with, so that its ranks come through here too.
 * `crl [SUBCOMMAND...] --help` (or -h) is answered here, from the page crl-main wrote at build time
 * into crl-help/ beside this file (apps/crl/help_pages.h), without LibTorch's load; any other form,
 * or a page that is not there, goes to crl-main as before. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A name help_pages.cpp gives a page to: [a-z0-9-], not an option. */
static int is_page_name(const char* s) {
  if (s[0] == '\0' || s[0] == '-') return 0;
  for (; *s != '\0'; ++s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-')) return 0;
  }
  return 1;
}

/* Prints SELF-help/crl.SUB.SUB when argv is `crl SUB SUB --help` and that page exists, and returns
 * the exit code (0, or 4 when stdout refused it); -1 when crl-main must answer. */
static int print_help_page(int argc, char** argv, const char* self) {
  if (argc < 2 || (strcmp(argv[argc - 1], "--help") != 0 && strcmp(argv[argc - 1], "-h") != 0)) return -1;
  char page[PATH_MAX];
  int used = snprintf(page, sizeof page, "%s-help/crl", self);
  if (used < 0 || (size_t)used >= sizeof page) return -1;
  for (int i = 1; i < argc - 1; ++i) {
    if (!is_page_name(argv[i])) return -1;
    const int more = snprintf(page + used, sizeof page - (size_t)used, ".%s", argv[i]);
    if (more < 0 || (size_t)(used + more) >= sizeof page) return -1;
    used += more;
  }
  FILE* in = fopen(page, "rb");
  if (in == NULL) return -1;
  char buffer[8192];
  size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, in)) > 0) fwrite(buffer, 1, got, stdout);
  fclose(in);
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 4;
}

int main(int argc, char** argv) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || (size_t)n + sizeof "-main" > sizeof self) {
    fprintf(stderr, "crl: cannot read /proc/self/exe\n");
    return 4;
  }
  self[n] = '\0';
  const int helped = print_help_page(argc, argv, self);
  if (helped >= 0) return helped;
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
  setenv("CRL_SELF", self, 1);
  char program[PATH_MAX];
  snprintf(program, sizeof program, "%s-main", self);
  execv(program, argv);
  perror(program);
  sigprocmask(SIG_SETMASK, &before, NULL);
  return 4;
}
