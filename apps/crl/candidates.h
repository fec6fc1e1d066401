// The candidates of `crl eval` and `crl data validate`, read from .crl and KernelBench-format .py
// files, folders of them and JSONL lines. A candidate whose text is no program to judge is kept with the reason, and becomes
// its own format_error verdict (as the same text does in the job); the others are judged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eval/eval_options.h"
#include "eval/verdict.h"
#include "program/program_text.h"
#include "suite/suite.h"

namespace crl::cli {

struct Candidate {
  std::string task_id;
  std::string name;  // its file (relative to its folder) or its JSONL line's id
  std::string text;  // the program's text as given: the results file keeps it, judged or not
  std::optional<ProgramText> program;  // absent: format_problem says why
  std::string format_problem;          // "FILE:LINE: what is wrong", naming the candidate's own line
  std::string completion;              // a JSONL line's completion (or its program as one), for data validate
  int line = 0;                        // a JSONL line's number (0 for a file)
  ProgramKind kind = ProgramKind::crl;  // a .py file or a line's "format": "kernelbench" is KernelBench's
};

// What is bad input (exit 3, nothing judged) and what is one candidate's format_error:
//   exit 3:        a path that is missing or unreadable, a folder that cannot be listed, a JSONL line
//                  that is not a JSON object with a string "task" and one string "completion" or
//                  "program" (the structure a script wrote), a task the suite lacks, no --task for a
//                  lone file, no candidates at all;
//   format_error:  a completion without a closed fenced block, a text with an unknown or repeated
//                  section marker or without a host section, a candidate with a spec section other
//                  than its task's own (a candidate receives its task's spec; its task's own is the
//                  reference judged against itself, `crl eval jobs/suite`).
// `task` (--task) is every candidate's task when given; else a folder's layout or the JSONL names it.
std::vector<Candidate> read_candidates(const std::vector<std::string>& inputs, const std::string& task);

// One JSONL file of {task, program or completion, id} lines (the SFT data's format, rl/sft_data.h).
std::vector<Candidate> read_candidates_jsonl(const std::string& path);

// The candidate of a policy's completion (its last fenced block, rl/completion.h) for `task`, named
// `name`; `origin` names it in the parser's messages. A completion without a program is this
// candidate's format_error, its text the completion.
Candidate candidate_of_completion(const std::string& task, const std::string& name, const std::string& completion,
                                  const std::string& origin, ProgramKind kind = ProgramKind::crl);

// Checks every candidate's task exists (InputError otherwise: before any work) and turns a spec
// section other than its task's own into that candidate's format_error.
void check_candidates_against(const Suite& suite, std::vector<Candidate>& candidates);

// The verdict of a candidate that holds no program: nothing was evaluated, reward 0.
eval::Verdict format_error_verdict(const Candidate& candidate, const eval::EvalOptions& options);

}  // namespace crl::cli
