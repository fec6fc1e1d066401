// Prompt text for the policy (the format is pinned by tests/data/rl/prompt_*.golden.txt).
#include "rl/prompt.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace crl::rl {
namespace {

// Text that ends in exactly one newline, so blocks join the same way whatever their source did.
std::string one_newline(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text + "\n";
}

}  // namespace

// The reference as the policy sees it: the spec's `kernelbench_params` (which KernelBench tensor is
// which param: judge metadata, up to 622 lines for a level-3 network) left out.
std::string reference_for_prompt(const std::string& text) {
  std::string out;
  bool skipping = false;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    if (line.starts_with("kernelbench_params:")) {
      skipping = true;
    } else if (skipping && !(line.starts_with(" ") || line.starts_with("-"))) {
      skipping = false;
    }
    if (!skipping) out.append(text, start, end - start + (end < text.size() ? 1 : 0));
    start = end + 1;
  }
  return out;
}

std::string build_prompt(const PromptInputs& in) {
  std::string out;
  out += "You write programs that compute exactly what a reference program computes, faster. "
         "The rules of the program format follow.\n\n";
  out += one_newline(in.instructions);
  const bool python = in.kind == ProgramKind::kernelbench;
  const char* fence = python ? "```python" : "```";
  if (python) {
    out += fmt::format("\n# Task {}\n\nThe reference module (KernelBench's `Model`):\n\n{}\n{}```\n", in.task_id, fence,
                       one_newline(in.reference));
  } else {
    out += fmt::format("\n# Task {}\n\nThe reference program:\n\n```\n{}```\n", in.task_id, one_newline(reference_for_prompt(in.reference)));
  }
  if (in.exemplars.empty()) {
    out += "\nThere are no earlier correct programs for this task yet.\n";
  } else {
    out += fmt::format("\nEarlier correct programs for this task, with their measured speedups over the reference "
                       "(higher is faster):\n");
    for (size_t i = 0; i < in.exemplars.size(); ++i) {
      const auto& e = in.exemplars[i];
      out += fmt::format("\nProgram {} (speedup {:.2f}x):\n\n{}\n{}```\n", static_cast<char>('A' + i), e.speedup, fence,
                         one_newline(e.program));
    }
  }
  out += "\nAnswer in three parts:\n";
  if (in.ask_for_analysis && !in.exemplars.empty()) {
    out += "1. Performance analysis: compare the programs above: which one was faster, and why.\n";
  } else {
    out += "1. Performance analysis: where the reference program spends its time.\n";
  }
  out += "2. Plan: what your program does differently to be faster.\n";
  if (python) {
    out += "3. The program: one fenced code block (```python) holding the whole candidate, a Python module that defines "
           "`class ModelNew(nn.Module)`: constructed with the arguments of the reference's `Model`, its parameters and "
           "buffers declared in the same order and shapes, called with the same inputs.\n";
    return out;
  }
  out += "3. The program: one fenced code block (```) holding the whole candidate, its `// crl:device` (optional) "
         "and `// crl:host` sections. Leave out `// crl:spec`: the candidate receives the reference's inputs "
         "and parameters.\n";
  return out;
}

std::string completion_from_program(const std::string& program, ProgramKind kind) {
  return fmt::format("1. Performance analysis:\n\n2. Plan:\n\n3. The program:\n\n```{}\n{}```\n",
                     kind == ProgramKind::kernelbench ? "python" : "", one_newline(program));
}

}  // namespace crl::rl
