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

}  // namespace crl
