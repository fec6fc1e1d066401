// SFT data: JSONL lines of {"task": ID, "completion": TEXT} or {"task": ID, "program": TEXT} (a
// program alone becomes a completion with an empty analysis and plan), plus optional "speedup"
// and "id". Used by the sft stage and by `crl data validate`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace crl::rl {

struct SftExample {
  std::string task;
  std::string completion;
  std::string program;            // the program's text (from "program", or the completion's block)
  std::optional<double> speedup;  // when the line says (crl data validate writes it)
  std::string id;                 // the line's "id", else "line N"
  int line = 0;
};

// Reads every line (blank lines skipped). Throws InputError naming file:line for a line that is
// not JSON nested at most kMaxJsonDepth levels (core/json_bounded.h), or not an object with a
// string "task" and exactly one of "completion" / "program" (strings). Lines are bounded (16 MiB)
// and so is their number (10 million).
std::vector<SftExample> read_sft_jsonl(const std::string& path);

}  // namespace crl::rl
