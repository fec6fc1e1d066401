// Extracting the candidate program from a completion (rules in completion.h).
#include "rl/completion.h"

#include <fmt/format.h>

#include <optional>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace crl::rl {
namespace {

// A fence line: optional indentation, then three or more backticks, then an optional info
// string (```cpp) on an opening fence; a closing fence has nothing after its backticks.
std::optional<size_t> fence_length(const std::string& line, bool closing) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || i > 3) return std::nullopt;
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == '`') ++n;
  if (n < 3) return std::nullopt;
  const std::string rest = line.substr(i + n);
  if (closing && rest.find_first_not_of(" \t\r") != std::string::npos) return std::nullopt;
  if (!closing && rest.find('`') != std::string::npos) return std::nullopt;
  return n;
}

}  // namespace

ParsedCompletion parse_completion(const std::string& completion, const std::string& origin, ProgramKind kind) {
  ParsedCompletion out;
  std::vector<std::string> lines;
  {
    std::istringstream in(completion);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  std::optional<std::string> last_block;
  bool unclosed = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto open = fence_length(lines[i], false);
    if (!open) continue;
    std::string body;
    size_t j = i + 1;
    bool closed = false;
    for (; j < lines.size(); ++j) {
      const auto close = fence_length(lines[j], true);
      if (close && *close >= *open) {
        closed = true;
        break;
      }
      body += lines[j];
      body += '\n';
    }
    if (!closed) {
      // The program is the last block; a cut-off one is not replaced by an earlier block.
      unclosed = true;
      last_block.reset();
      break;
    }
    last_block = body;
    i = j;
  }
  if (!last_block) {
    out.problem = unclosed ? "the completion's last code block is not closed (was it cut at the token limit?)"
                           : "the completion has no fenced code block holding a program";
    return out;
  }
  out.program_text = *last_block;
  if (kind == ProgramKind::kernelbench) {
    try {
      out.program = parse_kernelbench_text(out.program_text, origin);
    } catch (const InputError& e) {
      out.problem = fmt::format("the code block is not a KernelBench-format module: {}", e.what());
      return out;
    }
    out.ok = true;
    return out;
  }
  {
    std::istringstream in(out.program_text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(kSpecMarker, 0) == 0 && line.find_first_not_of(" \t\r", std::string(kSpecMarker).size()) == std::string::npos) {
        out.problem = "the program carries a `// crl:spec` section; a candidate receives the reference's spec and must not have one";
        return out;
      }
    }
  }
  try {
    out.program = parse_program_text(out.program_text, origin);
  } catch (const InputError& e) {
    out.problem = fmt::format("the code block is not a crl program: {}", e.what());
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace crl::rl
