// Landlock rulesets (Linux 5.13+): the folders a process may read and run from, and where it may
// write, built once in one process and applied to another (a candidate's worker, a compiler's
// child just before it runs the compiler).
#pragma once

#include <string>
#include <vector>

namespace crl {

struct LandlockRules {
  std::vector<std::string> readable;        // folders (and files) to read and run programs from
  std::vector<std::string> writable_dirs;   // folders where anything may be made, written, removed
  std::vector<std::string> writable_files;  // single files to write (device files such as /dev/null)
};

// The kernel's Landlock ABI version; 0 when it has none (then *why, when given, says so).
int landlock_abi(std::string* why = nullptr);

// A ruleset for `rules` as a close-on-exec fd (the caller closes it), or -1 with *why (if given) set when
// the kernel has no Landlock. Paths that do not exist get no rule. Throws Error when the kernel
// has Landlock and refuses a rule.
int build_landlock_ruleset(const LandlockRules& rules, std::string* why);

// Restricts the calling thread (and the threads and processes it starts afterwards) to `ruleset`,
// setting no_new_privs first. Only system calls, so a forked child may call it before exec; returns
// 0, or the errno of the call that failed.
int restrict_to_landlock_ruleset(int ruleset);

// How a ruleset reached the threads a process had already started when it was applied.
struct LandlockThreads {
  bool tsync = false;  // the kernel applied it to every thread at once (LANDLOCK_RESTRICT_SELF_TSYNC, ABI 8)
  int reached = 0;     // earlier threads that applied it themselves, in a signal handler crl sent them
  std::vector<std::string> unreached;  // "tid (name)" of earlier threads that never ran that handler
};

// Restricts every thread of the calling process to `ruleset`, not only the calling one: a thread
// started earlier (a CUDA driver's, a runtime's pool) keeps unrestricted file access otherwise, and
// code run on it (a host function, a signal handler) writes where the rules forbid. With Landlock
// ABI 8 the kernel does it at once; before, each earlier thread is sent a signal whose handler sets
// no_new_privs and applies the ruleset to itself (glibc's way of changing ids on every thread), and
// the process's threads are listed again until none is left unsent. A thread that blocks the signal
// is named in `unreached` after `wait_seconds`. Returns 0 or the errno of the calling thread's own
// restriction; *threads says how the others were reached.
int restrict_all_threads_to_landlock_ruleset(int ruleset, LandlockThreads* threads, double wait_seconds = 0.25);

}  // namespace crl
