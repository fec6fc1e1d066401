// `crl eval`: judge candidate programs against the task suite: compile, verify, time, verdict.
//   crl eval --task level1/019_relu cand.crl        one candidate against one task
//   crl eval candidates/                            every <dir>/<level>/<task>/*.crl (or --task for all)
//   crl eval rollouts.jsonl                         lines {"task", "program" or "completion", "id"}
//   crl eval --slice 2/8 ...                        the third of 8 equal runs of the candidates (a job array task)
//   crl eval ... --h5 F --resume                    only the candidates F holds no verdict of (a run cut
//                                                   short; internal_error verdicts do not count)
//   crl eval ... --h5 F --append                    these verdicts beside F's own (without one of the two,
//                                                   an existing F is refused: repeated timings are no new result)
// A table on the terminal with why each failed verdict failed, --json for scripts, --h5 for a
// results file; exit 0 when every verdict is ok, 1 when some is not (a candidate that holds no
// program is one format_error verdict, candidates.h), 3 for bad input, 4 when every verdict is
// internal_error (nothing was judged: evaluation does not work here, and the run is no result).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "apps/crl/candidates.h"
#include "apps/crl/commands.h"
#include "apps/crl/judging.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/text_table.h"
#include "eval/evaluator.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

struct EvalCommandOptions {
  std::string task;
  JudgeOptions judge;
  ResultsFileOptions results;
  uint64_t seed = 0;
  bool json = false;
  bool explain = false;
  std::string slice;  // "I/N": the I-th (from 0) of N contiguous runs of the sorted candidates
  std::vector<std::string> inputs;
};

// --slice I/N: candidates [I*M/N, (I+1)*M/N) of the M sorted ones, so that N array tasks judge each
// candidate once and a task's candidates stay together.
std::vector<Candidate> take_slice(std::vector<Candidate> all, const std::string& slice) {
  unsigned index = 0, count = 0;
  char end = 0;
  if (std::sscanf(slice.c_str(), "%u/%u%c", &index, &count, &end) != 2 || count == 0 || index >= count ||
      count > 1000000) {
    throw InputError(fmt::format("--slice '{}': give I/N with 0 <= I < N (e.g. 0/4 for the first of 4)", slice));
  }
  const size_t m = all.size();
  const size_t first = m * index / count, last = m * (index + 1) / count;
  return {std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(first)),
          std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(last))};
}

// --explain: for each verdict, every check it went through (compile, trials, hack guards, timing,
// re-measure) in order, whether it passed, and what it saw.
void print_explanation(const eval::Verdict& v) {
  std::cout << fmt::format("{} {}: {} ({})\n", v.task_id, v.candidate, v.status_text(), v.message);
  TextTable table({"check", "result", "seconds", "what it saw"});
  for (const auto& s : v.steps) {
    table.add_row({s.name, s.passed ? "pass" : "FAIL", fmt::format("{:.3f}", s.seconds), s.detail});
  }
  std::cout << table.str() << "\n";
}

// --resume: the candidates `path` holds no verdict of (by task and name; a name given twice counts
// twice). `commits` gets the commits that wrote it so far.
std::vector<Candidate> without_judged(std::vector<Candidate> candidates, const std::string& path,
                                      const nlohmann::json& eval_options, std::vector<std::string>* commits) {
  JudgedVerdicts judged = read_judged_verdicts(path, eval_options);
  *commits = judged.commits;
  const size_t before = candidates.size();
  std::vector<Candidate> left;
  for (auto& c : candidates) {
    if (!judged.take(c.task_id, c.name)) left.push_back(std::move(c));
  }
  std::cerr << fmt::format("crl eval --resume: {} holds verdicts of {} of the {} candidates; judging the other {}{}\n", path,
                           before - left.size(), before, left.size(),
                           judged.internal_errors > 0
                               ? fmt::format(" (its {} internal_error verdict(s) do not count)", judged.internal_errors)
                               : "");
  return left;
}

// Exit 0 when every verdict is ok, 1 when some is not; crl's own failures are said apart from the
// programs' (on stderr: --json's stdout stays one JSON document), and a run of nothing else is an
// error, so that a script or a sweep (slurm/eval-array.sbatch marks a slice done on 0 or 1) does not
// take it for a result.
int exit_code_of(const std::vector<eval::Verdict>& verdicts) {
  if (report_internal_errors(verdicts, "crl eval").all) return kExitInternal;
  const bool all_ok = std::all_of(verdicts.begin(), verdicts.end(), [](const eval::Verdict& v) { return v.ok(); });
  return all_ok ? kExitOk : kExitFailure;
}

int run_eval(const EvalCommandOptions& o) {
  refuse_unasked_append(o.results);
  const eval::EvalOptions options = eval_options_of(o.judge, o.seed);  // --backend cuda without a GPU: refused now
  const Suite suite = Suite::load(resolve_suite_dir(o.judge.suite_dir));
  if (!o.task.empty()) suite.find(o.task);
  std::vector<Candidate> candidates = read_candidates(o.inputs, o.task);
  if (!o.slice.empty()) candidates = take_slice(std::move(candidates), o.slice);
  check_candidates_against(suite, candidates);

  CompilerOptions compiler_options;
  compiler_options.cache_dir = absolute_cache_dir(o.judge.cache_dir);
  Compiler compiler(compiler_options);
  const nlohmann::json eval_options = eval_options_json(options, compiler);
  std::vector<std::string> earlier_commits;  // --resume: of the verdicts already in the file
  if (o.results.resume && std::filesystem::exists(o.results.h5)) {
    candidates = without_judged(std::move(candidates), o.results.h5, eval_options, &earlier_commits);
  }
  eval::Evaluator evaluator(options, compiler);
  std::optional<results::ResultsWriter> writer;
  if (!o.results.h5.empty()) {
    writer.emplace(o.results.h5);
    write_results_meta(*writer, options, eval_options, earlier_commits);
    if (!o.slice.empty()) writer->set_meta("eval_slice", o.slice);
  }
  const std::vector<eval::Verdict> verdicts =
      judge_candidates(candidates, {suite, evaluator, compile_window(o.judge, options), writer ? &*writer : nullptr, nullptr});
  if (writer) writer->close();
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : verdicts) out.push_back(eval::to_json(v));
    std::cout << out.dump(2) << "\n";
  } else {
    print_verdicts(verdicts);
  }
  if (o.explain && !o.json) {
    std::cout << "\n";
    for (const auto& v : verdicts) print_explanation(v);
  }
  return exit_code_of(verdicts);
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("eval", "Judge candidate programs: compile, verify against the reference, time, verdict");
  static EvalCommandOptions o;
  cmd->add_option("candidates", o.inputs, "A .crl file (with --task), a folder of them, or a .jsonl of {task, program or completion, id}")
      ->required();
  cmd->add_option("--task", o.task, "The task every candidate is for (e.g. level1/019_relu)");
  add_judge_options(cmd, o.judge);
  cmd->add_option("--seed", o.seed,
                  "Secret of the trial and timing inputs (default 0: a fresh one per task; a verdict's 'judge' step "
                  "names the one it used, to replay it). For replays only: a candidate that knows the secret knows "
                  "which slot of each timed batch is checked")
      ->capture_default_str();
  cmd->add_flag("--json", o.json, "Print the verdicts as a JSON array");
  cmd->add_flag("--explain", o.explain, "After the table, list each verdict's checks (hack guards included) and what each saw");
  add_results_file_options(cmd, o.results, "candidates");
  cmd->add_option("--slice", o.slice,
                  "I/N: judge only the I-th (from 0) of N equal runs of the sorted candidates (one job array task)");
  cmd->callback([&exit_code] { exit_code = run_eval(o); });
}

}  // namespace crl::cli
