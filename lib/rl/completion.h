// Reading the program out of a policy completion: the last fenced code block is the program.
// A completion with no (closed) fenced block, a block that carries a `// crl:spec` section, or a
// block that is not a .crl program (no host section, an unknown marker) has status format_error:
// reward 0, nothing evaluated.
#pragma once

#include <string>

#include "program/program_text.h"

namespace crl::rl {

struct ParsedCompletion {
  bool ok = false;
  std::string program_text;  // the block's text (when a block was found)
  ProgramText program;       // when ok
  std::string problem;       // why not, one line (when !ok)
};

// `origin` names the completion in the program's messages (e.g. "rollout 17"); `kind` is the
// program format the block must hold (a .crl program without a spec section, or a KernelBench module).
ParsedCompletion parse_completion(const std::string& completion, const std::string& origin,
                                  ProgramKind kind = ProgramKind::crl);

}  // namespace crl::rl
