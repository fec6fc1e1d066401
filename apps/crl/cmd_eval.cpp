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

#include "apps/crl/backend_choice.h"
#include "apps/crl/candidates.h"
#include "apps/crl/commands.h"
#include "machine/machine_probe.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/process_env.h"
#include "core/provenance.h"
#include "machine/gpu_names.h"
#include "core/text_table.h"
#include "eval/evaluator.h"
#include "eval/verdict_table.h"
#include "eval/verdict_why.h"
#include "program/program_text.h"
#include "results/results_reader.h"
#include "suite/suite.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl::cli {
namespace {

struct EvalCommandOptions {
  std::string task;
  std::string suite_dir;
  std::string backend;
  std::string scale;
  int trials = 5;
  double time_budget = -1;
  uint64_t seed = 0;
  bool json = false;
  bool no_timing = false;
  bool explain = false;
  bool no_sandbox = false;
  double gpu_memory_fraction = 0.45;  // the candidate worker's share of the GPU (EvalOptions)
  int gpu = 0;                       // which of the GPUs this process sees its workers use (EvalOptions)
  double remeasure_above = 3;
  double max_relative_ci = 0.1;  // EvalOptions: the widest interval a reward rests on
  int compile_ahead = -1;  // -1: 8 on CUDA (compiles use the CPU while the GPU times), 0 on the CPU
  int cpu_threads = 0;     // intra-op threads of the CPU workers; 0: LibTorch's default (every core)
  std::string h5;
  std::string cache_dir;
  std::string baseline = "eager";
  std::string slice;  // "I/N": the I-th (from 0) of N contiguous runs of the sorted candidates
  bool resume = false;  // with h5: skip the candidates it holds verdicts of
  bool append = false;  // with h5: add to a file that holds verdicts already
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

void show_progress(size_t done, size_t total, const std::string& what) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
  std::cerr << fmt::format("\r[{}{}] {}/{} {:<50.50}", std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(kWidth - filled), ' '), done, total, what)
            << std::flush;
}

std::string times_text(const eval::TimeSummary& t) {
  return t.samples > 0 ? fmt::format("{:.1f} ±{:.1f}", t.median_us, t.iqr_us / 2) : "-";
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

// The table's message column: its first line, cut where a word ends (a number cut in the middle
// reads as another number); the whole message follows under the table.
std::string table_message(const std::string& message) {
  constexpr size_t kWidth = 100;
  std::string line = message.substr(0, message.find('\n'));
  if (line.size() <= kWidth) return line;
  const size_t space = line.rfind(' ', kWidth);
  return line.substr(0, space == std::string::npos || space == 0 ? kWidth : space) + " ...";
}

void print_table(const std::vector<eval::Verdict>& verdicts) {
  TextTable table({"task", "candidate", "status", "speedup", "95% CI", "ref us", "cand us", "reward", "message"});
  for (const auto& v : verdicts) {
    const bool timed = v.reference_time.samples > 0;
    // The interval with its width: the reward is taken from it (1 when it includes 1, else its bound nearer 1).
    table.add_row({v.task_id, v.candidate, v.status_text(), timed ? fmt::format("{:.3f}", v.speedup) : "-",
                   timed ? fmt::format("{:.3f}..{:.3f} (+-{:.1f}%)", v.speedup_ci_low, v.speedup_ci_high, 100 * v.speedup_ci_half_width())
                         : "-",
                   times_text(v.reference_time), times_text(v.candidate_time), fmt::format("{:.2f}", v.reward),
                   table_message(v.message)});
  }
  std::cout << table.str();
}

// Under the table, each failed verdict and why (eval/verdict_why.h): the table's column is too
// narrow for a compiler's message or a mismatch's worst element.
void print_reasons(const std::vector<eval::Verdict>& verdicts) {
  bool first = true;
  for (const auto& v : verdicts) {
    const std::vector<std::string> lines = eval::why_lines(v);
    if (lines.empty()) continue;
    if (first) std::cout << "\nwhy:\n";
    first = false;
    std::cout << fmt::format("{} ({}): {}\n", v.candidate, v.task_id, v.status_text());
    for (const auto& line : lines) std::cout << "    " << line << "\n";
  }
}

// --resume: the candidates `path` holds no verdict of (by task and name; a name given twice counts
// twice), after checking that the file was judged as this run would judge (a reward timed another
// way must not sit beside these in one file). `commits` gets the commits that wrote it so far.
std::vector<Candidate> without_judged(std::vector<Candidate> candidates, const std::string& path,
                                      const nlohmann::json& eval_options, std::vector<std::string>* commits) {
  const results::ResultsReader reader(path);
  reader.validate({.tables = {{.table = "verdicts",
                               .columns = {{"task", results::ColumnType::string},
                                           {"candidate", results::ColumnType::string},
                                           {"status", results::ColumnType::string}}}},
                   .meta = {{.key = "earlier_git_commits", .shape = results::MetaShape::json_string_list},
                            {.key = "eval_options", .shape = results::MetaShape::json_object}}});
  const auto keys = reader.meta_keys();
  const auto has = [&](const char* key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  if (has("earlier_git_commits")) {
    for (const auto& c : reader.meta_json("earlier_git_commits")) commits->push_back(c.get<std::string>());
  }
  if (has("git_commit")) commits->push_back(reader.meta("git_commit"));
  if (has("eval_options")) {
    const nlohmann::json before = reader.meta_json("eval_options");
    for (const char* key : {"backend", "scale", "baseline", "trials", "time_budget_seconds"}) {
      if (before.contains(key) && before.at(key) != eval_options.at(key)) {
        throw InputError(fmt::format("--resume: {} was judged with {} {}, this run asks for {}; give another --h5 file",
                                     path, key, before.at(key).dump(), eval_options.at(key).dump()));
      }
    }
    // Rewards of another rule must not sit beside these: a file from before the rule was written
    // down paid the median's speedup.
    const nlohmann::json ci = before.value("max_relative_ci", nlohmann::json());
    if (ci != eval_options.at("max_relative_ci")) {
      throw InputError(fmt::format("--resume: {} was judged with max_relative_ci {} (rewards of another rule), this run asks for {}; "
                                   "give another --h5 file",
                                   path, ci.is_null() ? "(none: the median's speedup was the reward)" : ci.dump(),
                                   eval_options.at("max_relative_ci").dump()));
    }
  }
  const auto tables = reader.tables();
  if (std::find(tables.begin(), tables.end(), "verdicts") == tables.end()) return candidates;
  const auto tasks = reader.column_as<std::string>("verdicts", "task");
  const auto names = reader.column_as<std::string>("verdicts", "candidate");
  const auto statuses = reader.column_as<std::string>("verdicts", "status");
  // An internal_error is crl's failure, not a verdict on the program: judged again (the report
  // leaves those rows out, so the new verdict is the one that counts).
  std::map<std::pair<std::string, std::string>, int> judged;
  size_t internal = 0;
  for (size_t i = 0; i < tasks.size() && i < names.size() && i < statuses.size(); ++i) {
    if (statuses[i] == "internal_error") {
      ++internal;
    } else {
      ++judged[{tasks[i], names[i]}];
    }
  }
  const size_t before = candidates.size();
  std::vector<Candidate> left;
  for (auto& c : candidates) {
    auto it = judged.find({c.task_id, c.name});
    if (it != judged.end() && it->second > 0) {
      --it->second;
      continue;
    }
    left.push_back(std::move(c));
  }
  std::cerr << fmt::format("crl eval --resume: {} holds verdicts of {} of the {} candidates; judging the other {}{}\n", path,
                           before - left.size(), before, left.size(),
                           internal > 0 ? fmt::format(" (its {} internal_error verdict(s) do not count)", internal) : "");
  return left;
}

// The evaluator's options from the command's.
eval::EvalOptions eval_options_of(const EvalCommandOptions& o) {
  eval::EvalOptions options;
  options.backend = choose_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.seed = o.seed;
  options.timing = !o.no_timing;
  options.remeasure_above_speedup = o.remeasure_above;
  options.max_relative_ci = o.max_relative_ci;
  options.sandbox = !o.no_sandbox;
  options.baseline = o.baseline;
  options.cpu_threads = o.cpu_threads;
  options.gpu_memory_fraction = o.gpu_memory_fraction;
  options.gpu = o.gpu;
  if (o.time_budget >= 0) {
    options.time_budget_seconds = o.time_budget;
  } else {
    options.time_budget_seconds = options.backend == Backend::cuda ? 10 : 3;
  }
  return options;
}

// --h5 on a file that exists: --resume judges what it lacks, --append adds beside it; without
// either the same candidates would be judged again and their repeated timings sit beside the first
// (a report's "best" would become the max of noisy repeats), so it is refused before any work.
void refuse_unasked_append(const EvalCommandOptions& o) {
  if (o.resume && o.append) throw InputError("--resume and --append: give one (--resume skips what the file holds, --append judges all again)");
  if ((o.resume || o.append) && o.h5.empty()) {
    throw InputError(fmt::format("{} needs --h5 FILE: the results file whose verdicts are kept", o.resume ? "--resume" : "--append"));
  }
  std::error_code ec;
  if (o.h5.empty() || o.resume || o.append || !std::filesystem::exists(o.h5, ec) || std::filesystem::is_directory(o.h5, ec)) return;
  throw InputError(fmt::format("{}: the results file exists; give --resume to judge only the candidates it holds no verdict of, "
                               "--append to add these verdicts beside its own, or another --h5 file",
                               o.h5));
}

// The results file, opened before any work (a bad path fails now, not after an hour), with where
// its verdicts came from in /meta. A resumed file's verdicts may come from several commits:
// git_commit is this run's, and the others that wrote into it are kept beside it.
void open_results(results::ResultsWriter& writer, const EvalCommandOptions& o, const eval::EvalOptions& options,
                  const nlohmann::json& eval_options, const std::vector<std::string>& earlier_commits) {
  const std::string commit = git_commit();
  nlohmann::json others = nlohmann::json::array();
  for (const auto& c : earlier_commits) {
    if (c != commit && std::find(others.begin(), others.end(), c) == others.end()) others.push_back(c);
  }
  writer.set_meta("git_commit", commit);
  if (!others.empty()) writer.set_meta_json("earlier_git_commits", others);
  writer.set_meta_json("gpu_names", visible_gpu_names());
  writer.set_meta_json("eval_options", eval_options);
  writer.set_meta("reward_rule", eval::reward_rule(options.max_relative_ci, options.noisy_budget_factor));
  if (!o.slice.empty()) writer.set_meta("eval_slice", o.slice);
  writer.flush();
}

// Every candidate's verdict, in the candidates' order: those that hold a program judged by the
// evaluator, the others format_error without any work. With a writer, each verdict is appended
// and flushed as it is made (format errors in their place among them): a killed run keeps every
// verdict so far.
std::vector<eval::Verdict> judge_candidates(const std::vector<Candidate>& candidates, const Suite& suite,
                                            eval::Evaluator& evaluator, size_t window, results::ResultsWriter* writer) {
  std::vector<eval::Verdict> verdicts(candidates.size());
  std::vector<eval::Evaluator::Job> jobs;
  std::vector<size_t> job_candidate;  // the candidate each job judges
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (c.program) {
      jobs.push_back({&suite.find(c.task_id), *c.program, c.name});
      job_candidate.push_back(i);
    } else {
      verdicts[i] = format_error_verdict(c, evaluator.options());
    }
  }
  size_t written = 0;  // candidates whose verdicts are in the file
  const auto write_up_to = [&](size_t end) {
    for (; writer != nullptr && written < end; ++written) {
      const Candidate& c = candidates[written];
      eval::append_verdicts(*writer, {verdicts[written]}, {c.program ? render_program_text(*c.program) : c.text});
      writer->flush();
    }
  };
  const bool progress = isatty(STDERR_FILENO) && candidates.size() > 1;
  size_t judged = 0;  // verdicts come in job order
  if (!jobs.empty()) {
    evaluator.evaluate_all(
        jobs, window,
        [&](size_t j) {
          const Candidate& c = candidates[job_candidate[j]];
          if (progress) show_progress(job_candidate[j], candidates.size(), c.task_id + " " + c.name);
        },
        [&](const eval::Verdict& v) {
          const size_t i = job_candidate[judged++];
          verdicts[i] = v;
          write_up_to(i + 1);
        });
  }
  write_up_to(candidates.size());
  if (progress) {
    show_progress(candidates.size(), candidates.size(), "done");
    std::cerr << "\n";
  }
  return verdicts;
}

// crl's own failures are not results: said apart from the programs' (on stderr: --json's stdout
// stays one JSON document), and a run of nothing else is an error, so that a script or a sweep
// (slurm/eval-array.sbatch marks a slice done on 0 or 1) does not take it for a result.
int exit_code_of(const std::vector<eval::Verdict>& verdicts) {
  const auto is_internal = [](const eval::Verdict& v) { return v.status == eval::VerdictStatus::kInternalError; };
  const auto internal = static_cast<size_t>(std::count_if(verdicts.begin(), verdicts.end(), is_internal));
  if (internal > 0) {
    const auto first = std::find_if(verdicts.begin(), verdicts.end(), is_internal);
    // Its message and the start of the log it carries (the worker's own words are the cause).
    std::string why = first->message.substr(0, 500);
    std::replace(why.begin(), why.end(), '\n', ' ');
    std::cerr << fmt::format("crl eval: {} of {} verdicts are internal_error, crl's own failure and not the programs' "
                             "(judge them again; `crl doctor` checks this machine); the first, {} ({}): {}\n",
                             internal, verdicts.size(), first->candidate, first->task_id, why);
    if (internal == verdicts.size()) return kExitInternal;
  }
  const bool all_ok = std::all_of(verdicts.begin(), verdicts.end(), [](const eval::Verdict& v) { return v.ok(); });
  return all_ok ? kExitOk : kExitFailure;
}

std::string absolute_cache_dir(const std::string& dir) {
  // The compiler runs in its own build folders: a relative cache folder must be made absolute.
  if (dir.empty() || dir[0] == '/') return dir;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw_io_error("cannot read the current folder", ".");
  return std::string(cwd) + "/" + dir;
}

int run_eval(const EvalCommandOptions& o) {
  refuse_unasked_append(o);
  const eval::EvalOptions options = eval_options_of(o);  // --backend cuda without a GPU: refused now
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  if (!o.task.empty()) suite.find(o.task);
  std::vector<Candidate> candidates = read_candidates(o.inputs, o.task);
  if (!o.slice.empty()) candidates = take_slice(std::move(candidates), o.slice);
  check_candidates_against(suite, candidates);

  CompilerOptions compiler_options;
  compiler_options.cache_dir = absolute_cache_dir(o.cache_dir);
  Compiler compiler(compiler_options);
  const nlohmann::json eval_options = {{"backend", backend_name(options.backend)},
                                       {"scale", options.scale},
                                       {"baseline", options.baseline},
                                       {"trials", options.trials},
                                       {"time_budget_seconds", options.time_budget_seconds},
                                       {"max_relative_ci", options.max_relative_ci},
                                       {"noisy_budget_factor", options.noisy_budget_factor},
                                       {"strict_trials", options.strict_trials},
                                       {"sandbox", options.sandbox},
                                       {"cpu_threads", options.cpu_threads},
                                       {"host_compiler", compiler.host_cxx()},
                                       {"host", hostname()}};
  std::vector<std::string> earlier_commits;  // --resume: of the verdicts already in the file
  if (o.resume && std::filesystem::exists(o.h5)) {
    candidates = without_judged(std::move(candidates), o.h5, eval_options, &earlier_commits);
  }
  eval::Evaluator evaluator(options, compiler);
  // On the CPU backend compiles ahead would compete with the timed programs for the same cores.
  const size_t window = static_cast<size_t>(o.compile_ahead >= 0 ? o.compile_ahead : options.backend == Backend::cuda ? 8 : 0);
  std::optional<results::ResultsWriter> writer;
  if (!o.h5.empty()) {
    writer.emplace(o.h5);
    open_results(*writer, o, options, eval_options, earlier_commits);
  }
  const std::vector<eval::Verdict> verdicts = judge_candidates(candidates, suite, evaluator, window, writer ? &*writer : nullptr);
  if (writer) writer->close();
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : verdicts) out.push_back(eval::to_json(v));
    std::cout << out.dump(2) << "\n";
  } else {
    print_table(verdicts);
    print_reasons(verdicts);
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
  cmd->add_option("--suite,--suite-dir", o.suite_dir, "The task suite folder (default: $CRL_SUITE_DIR or the source tree's)");
  cmd->add_option("--backend", o.backend, "cpu or cuda (default: cuda when a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--scale", o.scale, "small or full (default: small on cpu, full on cuda)");
  cmd->add_option("--trials", o.trials, "Correctness trials, each on inputs from a new seed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--time-budget", o.time_budget, "Seconds of timing per candidate (default: 3 on cpu, 10 on cuda)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--seed", o.seed,
                  "Secret of the trial and timing inputs (default 0: a fresh one per task; a verdict's 'judge' step "
                  "names the one it used, to replay it). For replays only: a candidate that knows the secret knows "
                  "which slot of each timed batch is checked")
      ->capture_default_str();
  cmd->add_flag("--no-timing", o.no_timing, "Check correctness only");
  cmd->add_flag("--json", o.json, "Print the verdicts as a JSON array");
  cmd->add_flag("--explain", o.explain, "After the table, list each verdict's checks (hack guards included) and what each saw");
  cmd->add_option("--cpu-threads", o.cpu_threads,
                  "Intra-op threads of the CPU backend's workers (default 0: LibTorch's, every core; on a small "
                  "machine 1 keeps the programs from competing with the evaluator for cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--remeasure-above", o.remeasure_above,
                  "Speedups above this are re-measured one call at a time in a fresh worker before they count")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--max-relative-ci", o.max_relative_ci,
                  "The widest 95% interval of a speedup (relative half width) a reward may rest on: wider when the time "
                  "budget is spent, it is measured on (up to 3x the budget), then internal_error (machine too noisy)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 100.0));
  cmd->add_option("--baseline", o.baseline,
                  "How the reference is timed: eager (called, as KernelBench times it) or cuda_graph (each call "
                  "captured once and replayed: what a user would try before writing kernels; CUDA only)")
      ->check(CLI::IsMember({"eager", "cuda_graph"}));
  cmd->add_flag("--no-sandbox", o.no_sandbox, "Run candidates without seccomp and Landlock (debugging only)");
  cmd->add_option("--gpu", o.gpu,
                  "Which GPU (an index into those this process sees) the judge and the workers use; they see "
                  "that one alone")
      ->capture_default_str()
      ->check(CLI::Range(0, 1023));
  cmd->add_option("--gpu-memory-fraction", o.gpu_memory_fraction,
                  "Share of the GPU's memory the candidate's worker may hold (its input arena and caching allocator); "
                  "the reference's timing worker has 0.25 and the judge 0.25, and the three together at most 0.95")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--compile-ahead", o.compile_ahead,
                  "Candidates compiled ahead of the one being judged (default: 8 on CUDA, 0 on the CPU)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--h5", o.h5, "Append the verdicts to this HDF5 results file (table 'verdicts')");
  cmd->add_flag("--resume", o.resume,
                "With --h5: judge only the candidates the file holds no verdict of (by task and name), after "
                "checking it was judged with the same backend, scale, baseline, trials, time budget and noise limit "
                "(--max-relative-ci)");
  cmd->add_flag("--append", o.append,
                "With --h5: add these verdicts to a file that holds verdicts already (without --resume or --append an "
                "existing file is refused: the same candidates judged twice would sit in it twice)");
  cmd->add_option("--slice", o.slice,
                  "I/N: judge only the I-th (from 0) of N equal runs of the sorted candidates (one job array task)");
  cmd->add_option("--cache-dir", o.cache_dir, "Compile cache folder (default: $CRL_CACHE_DIR or ~/.cache/crl/compile)");
  cmd->callback([&exit_code] { exit_code = run_eval(o); });
}

}  // namespace crl::cli
