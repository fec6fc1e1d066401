// A static scan of a candidate's text for constructs that hacks use (other streams, threads,
// static state, inline assembly, the loader, environment, files). For the report only: a text
// scan is easy to evade, so no verdict rests on it; the run-time guards decide.
#pragma once

#include <string>
#include <vector>

namespace crl::eval {

struct ScanFinding {
  int line = 0;            // 1-based line of the program text
  std::string construct;   // e.g. "other CUDA stream", "host thread"
  std::string text;        // the line, trimmed
};

std::vector<ScanFinding> static_scan(const std::string& program_text);

// "line 12: host thread (std::thread t(...)); ..." or "nothing suspicious".
std::string describe(const std::vector<ScanFinding>& findings);

}  // namespace crl::eval
