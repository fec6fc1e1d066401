// Extracts the indented example blocks of docs/program-format.md, so tests keep the doc honest.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace crl::testing {

// The 4-space-indented block that follows the line `heading` (e.g. "A reference:"), unindented;
// "" when there is no such heading.
inline std::string format_doc_example(const std::string& heading) {
  std::ifstream in(std::string(CRL_SOURCE_DIR) + "/docs/program-format.md");
  std::string line, block;
  bool found = false, inside = false;
  while (std::getline(in, line)) {
    if (!found) {
      found = line == heading;
      continue;
    }
    if (line.rfind("    ", 0) == 0) {
      inside = true;
      block += line.substr(4) + "\n";
    } else if (inside && !line.empty()) {
      break;
    } else if (inside) {
      block += "\n";
    }
  }
  return block;
}

}  // namespace crl::testing
