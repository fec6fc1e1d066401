// SFT data: JSONL lines of {"task": ID, "completion": TEXT} or {"task": ID, "program": TEXT} (a
// program alone becomes a completion with an empty analysis and plan), plus optional "speedup",
// "id" and "format" ("crl", the default, or "kernelbench": the program is a KernelBench-format
// Python module). Used by the sft stage, `crl eval` and `crl data validate`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "program/program_text.h"

namespace crl::rl {

struct SftExample {
  std::string task;
  std::string completion;
  std::string program;            // the program's text (from "program", or the completion's block)
  ProgramKind kind = ProgramKind::crl;  // "format": "crl" (the default) or "kernelbench"
  std::optional<double> speedup;  // when the line says (crl data validate writes it)
  std::string id;                 // the line's "id", else "line N"
  int line = 0;
  // Why the completion holds no program (read with UnparsedCompletions::kKeep; program is then
  // empty): "FILE:LINE: the completion has no fenced code block ...".
  std::string format_problem;
};

// What a completion without a program (no closed fenced block, a spec section, not a .crl program)
// is. kRefuse for training data (the sft stage): the file is wrong. kKeep for the commands that
// judge many (crl eval, crl data validate), which filter raw model output: that line's verdict is
// format_error, as the same text's is in the job, and the other lines are judged.
enum class UnparsedCompletions { kRefuse, kKeep };

// Reads every line (blank lines skipped). Throws InputError naming file:line for a line that is
// not JSON nested at most kMaxJsonDepth levels (core/json_bounded.h), or not an object with a
// string "task" and exactly one of "completion" / "program" (strings). Lines are bounded (16 MiB)
// and so is their number (10 million). A completion that holds no program throws too, unless
// `unparsed` is kKeep (see above).
std::vector<SftExample> read_sft_jsonl(const std::string& path, UnparsedCompletions unparsed = UnparsedCompletions::kRefuse);

}  // namespace crl::rl
