// The policy's prompt for one task: the instructions (docs/program-format.md), the task's
// reference program, up to K earlier correct programs for it with their measured speedups (or a
// sentence saying there are none yet), and the three parts the answer must have: an analysis of
// those programs, a plan, and the program in one fenced block (completion.h reads it back).
#pragma once

#include <string>
#include <vector>

#include "program/program_text.h"

namespace crl::rl {

struct PromptExemplar {
  std::string program;  // the candidate's text (device and host sections)
  double speedup = 0;   // measured: reference time / its time
};

struct PromptInputs {
  std::string instructions;    // the program format, as docs/program-format.md gives it
  std::string task_id;
  std::string reference;       // the task's reference program, as in the suite (shown without its kernelbench_params)
  std::vector<PromptExemplar> exemplars;
  bool ask_for_analysis = true;  // false for stages without exemplars (sft, selftrain): still asks for the plan
  // kernelbench: the reference is the task's KernelBench module and the answer a Python module
  // defining ModelNew (the job's program_format).
  ProgramKind kind = ProgramKind::crl;
};

// The user message (plain text; the chat template or the raw format wraps it).
std::string build_prompt(const PromptInputs& inputs);

// A reference program without its spec's `kernelbench_params` block (what the prompt shows).
std::string reference_for_prompt(const std::string& text);

// A completion made from a program alone (SFT data of {task, program}): an empty analysis and
// plan, then the program in the fenced block the prompt asks for.
std::string completion_from_program(const std::string& program, ProgramKind kind = ProgramKind::crl);

}  // namespace crl::rl
