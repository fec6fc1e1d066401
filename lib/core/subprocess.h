// Running a child program to completion with a timeout, capturing its output (compilers, probes).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace crl {

struct CommandResult {
  int exit_code = -1;     // exit status, or -1 when killed by a signal or never started
  int signal = 0;         // the signal that ended it, 0 if none
  bool timed_out = false; // killed because it ran past the timeout
  std::string output;     // stdout and stderr, interleaved, cut to max_output bytes
  double seconds = 0;     // wall-clock time
  bool ok() const { return exit_code == 0 && !timed_out; }
};

struct CommandOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  size_t max_output = 1 << 20;
  std::string working_dir;                   // empty: inherit
  std::map<std::string, std::string> env;    // added to (or overriding) the parent's environment
  // A Landlock ruleset (core/landlock.h) the child restricts itself to before it runs the program;
  // -1: none. A child that cannot apply it exits 126 without running anything.
  int landlock_ruleset = -1;
};

// Runs argv[0] (looked up on PATH) in its own process group; on timeout the whole group is killed.
// Throws ApiError only when the child cannot be started at all.
CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& options = {});

// The full path of `program` on PATH, or "" when absent.
std::string find_on_path(const std::string& program);

}  // namespace crl
