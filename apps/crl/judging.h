// Judging many candidates into a results file, shared by `crl eval` and `crl eval-model`: the
// evaluator's options as both commands take them, the --h5 / --resume / --append rules, the
// results file's /meta, the judging loop (each verdict appended and flushed as it is made), the
// progress line, the verdict table with why each failed, and the exit code of a run of verdicts.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "apps/crl/candidates.h"
#include "compile/compiler.h"
#include "eval/eval_options.h"
#include "eval/evaluator.h"
#include "eval/verdict.h"
#include "results/results_writer.h"
#include "suite/suite.h"

namespace crl::cli {

// The evaluator's options as the commands take them (add_judge_options lists each with its help).
struct JudgeOptions {
  std::string suite_dir;
  std::string backend;
  std::string scale;
  int trials = 5;
  double time_budget = -1;
  bool no_timing = false;
  bool no_sandbox = false;
  bool call_turns = false;
  double gpu_memory_fraction = 0;
  double reference_gpu_memory_fraction = 0;  // the reference's timing worker's (0: planned)
  double judge_gpu_memory_fraction = 0;      // the judge's (0: planned)  // the candidate worker's share of the GPU (EvalOptions)
  int gpu = 0;                        // which of the GPUs this process sees its workers use (EvalOptions)
  double remeasure_above = 3;
  double max_relative_ci = 0.1;  // EvalOptions: the widest interval a reward rests on
  int compile_ahead = -1;        // -1: 8 on CUDA (compiles use the CPU while the GPU times), 0 on the CPU
  int cpu_threads = 0;           // intra-op threads of the CPU workers; 0: LibTorch's default (every core)
  std::string cache_dir;
  std::string baseline = "eager";
  std::string precision = "fp32";  // EvalOptions::precision: fp32, or tf32 where opted in
  std::string kernelbench;  // a KernelBench checkout: KernelBench's rule for parameters (EvalOptions::kernelbench_dir)
};

// The results file's options: --h5 FILE, --resume, --append.
struct ResultsFileOptions {
  std::string h5;
  bool resume = false;  // skip the candidates the file holds verdicts of
  bool append = false;  // add to a file that holds verdicts already
};

void add_judge_options(CLI::App* cmd, JudgeOptions& o);
// --kernelbench DIR (EvalOptions::kernelbench_dir), for every command that judges programs.
void add_kernelbench_option(CLI::App* cmd, std::string& dir);
// `what` names the rows in the help ("candidates", "samples").
void add_results_file_options(CLI::App* cmd, ResultsFileOptions& o, const std::string& what);

// The evaluator's options from the command's (--backend cuda without a GPU: refused now).
eval::EvalOptions eval_options_of(const JudgeOptions& o, uint64_t seed);
// /meta `eval_options` of a results file: what a --resume must match, and where it was judged.
nlohmann::json eval_options_json(const eval::EvalOptions& options, const Compiler& compiler);
// --cache-dir made absolute (the compiler runs in its own build folders).
std::string absolute_cache_dir(const std::string& dir);
// Candidates compiled ahead of the one being judged: --compile-ahead, else 8 on CUDA, 0 on the CPU
// (there, compiles ahead would compete with the timed programs for the same cores).
size_t compile_window(const JudgeOptions& o, const eval::EvalOptions& options);

// --h5 on a file that exists: --resume judges what it lacks, --append adds beside it; without
// either the same candidates would be judged again and their repeated timings sit beside the first
// (a report's "best" would become the max of noisy repeats), so it is refused before any work.
void refuse_unasked_append(const ResultsFileOptions& o);

// What an existing results file holds, for --resume: (task, candidate) -> verdicts that count
// (internal_error is crl's failure, not a verdict on the program: it is judged again), after checking
// that it was judged as this run would judge (a reward timed another way must not sit beside these).
struct JudgedVerdicts {
  std::map<std::pair<std::string, std::string>, int> counts;
  size_t internal_errors = 0;
  std::vector<std::string> commits;  // the commits that wrote it so far
  // Takes one verdict of (task, candidate) if the file holds one not taken yet.
  bool take(const std::string& task, const std::string& candidate);
};
JudgedVerdicts read_judged_verdicts(const std::string& path, const nlohmann::json& eval_options);

// The results file's /meta: this commit (and the earlier ones that wrote into it), GPUs, the
// evaluator's options and the reward rule; flushed, so that a bad path fails before any work.
void write_results_meta(results::ResultsWriter& writer, const eval::EvalOptions& options, const nlohmann::json& eval_options,
                        const std::vector<std::string>& earlier_commits);

// "step 12/40, 3.1/min, ETA 4m10s" for a long loop's progress line (rate and ETA from `start`).
std::string progress_text(size_t done, size_t total, std::chrono::steady_clock::time_point start, const std::string& unit);

// Every candidate's verdict, in the candidates' order: those that hold a program judged by the
// evaluator, the others format_error without any work. With a writer, each verdict is appended
// (its program text beside it; `after_write(i, row)` adds what else the caller keeps of candidate i)
// and flushed as it is made, format errors in their place among them: a killed run keeps every
// verdict so far. Progress: a bar on a terminal; elsewhere (a batch job's log) a line every tenth
// of the way, each verdict's for fewer than 20 candidates, named after `command`.
struct JudgeRun {
  const Suite& suite;
  eval::Evaluator& evaluator;
  size_t window = 0;
  results::ResultsWriter* writer = nullptr;
  std::function<void(size_t candidate, int64_t row)> after_write;
  std::string command = "crl eval";
};
std::vector<eval::Verdict> judge_candidates(const std::vector<Candidate>& candidates, const JudgeRun& run);

// The verdicts as a table, then under it each failed verdict and why (eval/verdict_why.h).
void print_verdicts(const std::vector<eval::Verdict>& verdicts);

// crl's own failures (internal_error) counted on stderr, apart from the programs' results; their
// count, and whether every verdict is one (nothing was judged).
struct InternalErrors {
  size_t count = 0;
  bool all = false;
};
InternalErrors report_internal_errors(const std::vector<eval::Verdict>& verdicts, const std::string& command);

}  // namespace crl::cli
