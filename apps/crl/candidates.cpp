// Reading the candidates of the commands that judge many (rules in candidates.h).
#include "apps/crl/candidates.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "compile/compiler.h"
#include "core/error.h"
#include "core/read_file.h"
#include "rl/completion.h"
#include "rl/sft_data.h"

namespace crl::cli {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A candidate file's format by its name: .py is KernelBench's, .crl crl's; others are no candidates.
bool is_candidate_file(const std::string& name) { return ends_with(name, ".crl") || ends_with(name, ".py"); }
ProgramKind kind_of_file(const std::string& name) { return ends_with(name, ".py") ? ProgramKind::kernelbench : ProgramKind::crl; }

// Every .crl and .py under `dir`, as paths relative to it, sorted.
void list_programs(const std::string& dir, const std::string& relative, std::vector<std::string>& out) {
  DIR* d = opendir((dir + relative).c_str());
  if (d == nullptr) throw_io_error("cannot list the candidate folder", dir + relative);
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string rel = relative + "/" + name;
    if (is_directory(dir + rel)) {
      list_programs(dir, rel, out);
    } else if (is_candidate_file(name)) {
      out.push_back(rel.substr(1));
    }
  }
  closedir(d);
  std::sort(out.begin(), out.end());
}

// The task of a candidate at `relative` in a folder: level<N>/<NNN>_<name>/<file>.crl (or .py) or
// level<N>/<NNN>_<name>.crl (or .py).
std::string task_of_path(const std::string& relative, const std::string& folder) {
  const auto first = relative.find('/');
  if (first == std::string::npos) {
    throw InputError(fmt::format("{}/{}: give --task, or place candidates at <folder>/level<N>/<task>/<name>.crl",
                                 folder, relative));
  }
  const auto second = relative.find('/', first + 1);
  return second == std::string::npos ? relative.substr(0, relative.rfind('.')) : relative.substr(0, second);
}

// The candidate of `text` named `origin` in messages: its program, or why it has none (the
// parser's message names origin and line). Only the text's own faults are caught here: reading it
// happened before.
Candidate candidate_of_text(std::string task, std::string name, std::string text, const std::string& origin, ProgramKind kind) {
  Candidate c{.task_id = std::move(task), .name = std::move(name), .text = std::move(text), .kind = kind};
  try {
    c.program = kind == ProgramKind::kernelbench ? parse_kernelbench_text(c.text, origin) : parse_program_text(c.text, origin);
  } catch (const InputError& e) {
    c.format_problem = e.what();
  }
  return c;
}

Candidate candidate_file(const std::string& task, const std::string& name, const std::string& path) {
  // A file that cannot be read is bad input (exit 3); one that reads but does not parse is a format_error.
  if (access(path.c_str(), R_OK) != 0) throw InputError(path + ": no such candidate file (or it is unreadable)");
  return candidate_of_text(task, name, read_input_file(path, "candidate program"), path, kind_of_file(path));
}

}  // namespace

std::vector<Candidate> read_candidates_jsonl(const std::string& path) {
  std::vector<Candidate> out;
  for (rl::SftExample& e : rl::read_sft_jsonl(path, rl::UnparsedCompletions::kKeep)) {
    Candidate c;
    if (e.format_problem.empty()) {
      c = candidate_of_text(e.task, e.id, e.program, fmt::format("{}:{}", path, e.line), e.kind);
    } else {
      // No block was found: the results file keeps the completion, the only text there is.
      c = Candidate{.task_id = e.task, .name = e.id, .text = e.completion, .format_problem = e.format_problem, .kind = e.kind};
    }
    c.completion = std::move(e.completion);
    c.line = e.line;
    out.push_back(std::move(c));
  }
  return out;
}

Candidate candidate_of_completion(const std::string& task, const std::string& name, const std::string& completion,
                                  const std::string& origin, ProgramKind kind) {
  rl::ParsedCompletion parsed = rl::parse_completion(completion, origin, kind);
  Candidate c{.task_id = task, .name = name, .completion = completion, .kind = kind};
  if (parsed.ok) {
    c.text = std::move(parsed.program_text);
    c.program = std::move(parsed.program);
  } else {
    c.text = completion;
    c.format_problem = fmt::format("{}: {}", origin, parsed.problem);
  }
  return c;
}

std::vector<Candidate> read_candidates(const std::vector<std::string>& inputs, const std::string& task) {
  std::vector<Candidate> out;
  for (const std::string& input : inputs) {
    if (is_directory(input)) {
      std::vector<std::string> files;
      list_programs(input, "", files);
      for (const auto& rel : files) {
        out.push_back(candidate_file(task.empty() ? task_of_path(rel, input) : task, rel, input + "/" + rel));
      }
    } else if (ends_with(input, ".jsonl")) {
      for (auto& c : read_candidates_jsonl(input)) out.push_back(std::move(c));
    } else {
      if (access(input.c_str(), R_OK) != 0) throw InputError(input + ": no such candidate file (or it is unreadable)");
      if (task.empty()) throw InputError(input + ": give the task it is a candidate for with --task");
      out.push_back(candidate_file(task, input, input));
    }
  }
  if (out.empty()) throw InputError("no candidates found in " + fmt::format("{}", fmt::join(inputs, ", ")));
  // Candidates of one task together, so its reference outputs are computed once.
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.task_id < b.task_id; });
  return out;
}

void check_candidates_against(const Suite& suite, std::vector<Candidate>& candidates) {
  for (Candidate& c : candidates) {
    const Task& task = suite.find(c.task_id);  // an unknown task is bad input, before any work
    if (!c.program || !c.program->spec.present || c.program->spec.text == task.program.spec.text) continue;
    // In the job the same text is a format_error (rl/completion.h): a candidate receives its task's
    // spec, and one that brings another would be judged on inputs of its own choosing.
    c.format_problem = fmt::format("{}:{}: a candidate has a '{}' section, and not {}'s own; a candidate receives its "
                                   "task's spec (remove the section)",
                                   c.program->origin, c.program->spec.first_line - 1, kSpecMarker, c.task_id);
    c.program.reset();
  }
}

eval::Verdict format_error_verdict(const Candidate& candidate, const eval::EvalOptions& options) {
  eval::Verdict v;
  v.task_id = candidate.task_id;
  v.candidate = candidate.name;
  v.backend = backend_name(options.backend);
  v.scale = options.scale;
  v.baseline = options.baseline;
  v.format = program_kind_name(candidate.kind);
  v.params = eval::params_rule_name(options);
  v.status = eval::VerdictStatus::kFormatError;
  v.message = candidate.format_problem;
  v.reward = 0;
  v.steps.push_back({.name = "parse", .passed = false, .detail = candidate.format_problem});
  return v;
}

}  // namespace crl::cli
