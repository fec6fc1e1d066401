// Why a verdict is not ok, in a few lines for a person at a terminal (crl eval's table is followed
// by them): the compiler's first lines, which point at the program's own lines; the failed check and
// what it saw (a mismatch's worst element in full, the guard that fired); a crashed worker's last words.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "eval/verdict.h"

namespace crl::eval {

// The lines under a failed verdict, each unindented and whole (never cut inside a word or number);
// empty for an ok verdict. At most `max_log_lines` lines of a log are quoted, then a line saying
// how many more there are and where to read them (--json).
std::vector<std::string> why_lines(const Verdict& verdict, size_t max_log_lines = 8);

}  // namespace crl::eval
