// `crl eval`: judge candidate programs against the task suite: compile, verify, time, verdict.
//   crl eval --task level1/019_relu cand.crl        one candidate against one task
//   crl eval candidates/                            every <dir>/<level>/<task>/*.crl (or --task for all)
//   crl eval rollouts.jsonl                         lines {"task", "program" or "completion", "id"}
//   crl eval --slice 2/8 ...                        the third of 8 equal runs of the candidates (a job array task)
//   crl eval ... --h5 F --resume                    only the candidates F holds no verdict of (a run cut
//                                                   short; internal_error verdicts do not count)
// A table on the terminal, --json for scripts, --h5 for a results file; exit 0 when every verdict
// is ok, 1 when some is not, 3 for bad input, 4 when every verdict is internal_error (nothing was
// judged: evaluation does not work here, and the run is no result).
#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

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
#include "program/program_text.h"
#include "results/results_reader.h"
#include "rl/sft_data.h"
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
  double gpu_memory_fraction = 0.6;  // each program worker's share of the GPU (EvalOptions)
  int gpu = 0;                       // which of the GPUs this process sees its workers use (EvalOptions)
  double remeasure_above = 3;
  double max_relative_ci = 0.1;  // EvalOptions: the widest interval a reward rests on
  int compile_ahead = -1;  // -1: 8 on CUDA (compiles use the CPU while the GPU times), 0 on the CPU
  int cpu_threads = 0;     // intra-op threads of the CPU workers; 0: LibTorch's default (every core)
  std::string h5;
  std::string cache_dir;
  std::string baseline = "eager";
  std::string precision = "fp32";
  std::string slice;  // "I/N": the I-th (from 0) of N contiguous runs of the sorted candidates
  bool resume = false;  // with h5: skip the candidates it holds verdicts of
  std::vector<std::string> inputs;
};

struct Candidate {
  std::string task_id;
  std::string name;
  ProgramText program;
};

bool gpu_visible() { return cuda_device_visible(); }

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every .crl under `dir`, as paths relative to it, sorted.
void list_programs(const std::string& dir, const std::string& relative, std::vector<std::string>& out) {
  DIR* d = opendir((dir + relative).c_str());
  if (d == nullptr) throw_io_error("cannot list the candidate folder", dir + relative);
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string rel = relative + "/" + name;
    if (is_directory(dir + rel)) {
      list_programs(dir, rel, out);
    } else if (ends_with(name, ".crl")) {
      out.push_back(rel.substr(1));
    }
  }
  closedir(d);
  std::sort(out.begin(), out.end());
}

// The task of a candidate at `relative` in a folder: level<N>/<NNN>_<name>/<file>.crl or
// level<N>/<NNN>_<name>.crl.
std::string task_of_path(const std::string& relative, const std::string& folder) {
  const auto first = relative.find('/');
  if (first == std::string::npos) {
    throw InputError(fmt::format("{}/{}: give --task, or place candidates at <folder>/level<N>/<task>/<name>.crl",
                                 folder, relative));
  }
  const auto second = relative.find('/', first + 1);
  std::string id = second == std::string::npos ? relative.substr(0, relative.size() - 4) : relative.substr(0, second);
  return id;
}

// JSONL candidates in the SFT data's format (rl/sft_data.h): {task, program} or {task, completion}
// (the completion's last fenced block), with an optional id; `crl data validate` reads the same.
std::vector<Candidate> read_jsonl(const std::string& path) {
  std::vector<Candidate> out;
  for (const rl::SftExample& e : rl::read_sft_jsonl(path)) {
    out.push_back({e.task, e.id, parse_program_text(e.program, fmt::format("{}:{}", path, e.line))});
  }
  return out;
}

std::vector<Candidate> collect_candidates(const EvalCommandOptions& o) {
  std::vector<Candidate> out;
  for (const std::string& input : o.inputs) {
    if (is_directory(input)) {
      std::vector<std::string> files;
      list_programs(input, "", files);
      for (const auto& rel : files) {
        out.push_back({o.task.empty() ? task_of_path(rel, input) : o.task, rel, load_program_file(input + "/" + rel)});
      }
    } else if (ends_with(input, ".jsonl")) {
      auto lines = read_jsonl(input);
      for (auto& c : lines) out.push_back(std::move(c));
    } else {
      // A candidate that cannot be read is bad input (exit 3), like one that does not parse.
      if (access(input.c_str(), R_OK) != 0) throw InputError(input + ": no such candidate file (or it is unreadable)");
      if (o.task.empty()) throw InputError(input + ": give the task it is a candidate for with --task");
      out.push_back({o.task, input, load_program_file(input)});
    }
  }
  if (out.empty()) throw InputError("no candidates found in " + fmt::format("{}", fmt::join(o.inputs, ", ")));

  // Candidates of one task together, so its reference outputs are computed once.
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.task_id < b.task_id; });
  return out;
}

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

void print_table(const std::vector<eval::Verdict>& verdicts) {
  TextTable table({"task", "candidate", "status", "speedup", "95% CI", "ref us", "cand us", "reward", "message"});
  for (const auto& v : verdicts) {
    const bool timed = v.reference_time.samples > 0;
    // The interval with its width: the reward is taken from it (1 when it includes 1, else its bound nearer 1).
    table.add_row({v.task_id, v.candidate, v.status_text(), timed ? fmt::format("{:.3f}", v.speedup) : "-",
                   timed ? fmt::format("{:.3f}..{:.3f} (+-{:.1f}%)", v.speedup_ci_low, v.speedup_ci_high, 100 * v.speedup_ci_half_width())
                         : "-",
                   times_text(v.reference_time), times_text(v.candidate_time), fmt::format("{:.2f}", v.reward),
                   v.message.substr(0, v.message.find('\n')).substr(0, 100)});
  }
  std::cout << table.str();
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
    for (const char* key : {"backend", "scale", "baseline", "precision", "trials", "time_budget_seconds"}) {
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
  options.backend = o.backend.empty() ? (gpu_visible() ? Backend::cuda : Backend::cpu) : parse_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.seed = o.seed;
  options.timing = !o.no_timing;
  options.remeasure_above_speedup = o.remeasure_above;
  options.max_relative_ci = o.max_relative_ci;
  options.sandbox = !o.no_sandbox;
  options.baseline = o.baseline;
  options.precision = parse_precision(o.precision);
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

int run_eval(const EvalCommandOptions& o) {
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  if (!o.task.empty()) suite.find(o.task);
  std::vector<Candidate> candidates = collect_candidates(o);
  if (!o.slice.empty()) candidates = take_slice(std::move(candidates), o.slice);
  for (const auto& c : candidates) {
    const Task& task = suite.find(c.task_id);  // unknown tasks are bad input, before any work
    // A candidate has no spec: it receives the task's (docs/program-format.md). One whose spec is
    // the task's own is the reference judged against itself (`crl eval jobs/suite`); any other is
    // a malformed candidate, not a program to judge.
    if (c.program.spec.present && c.program.spec.text != task.program.spec.text) {
      throw InputError(fmt::format("{}:{}: a candidate has a '{}' section, and not {}'s own; a candidate receives its "
                                   "task's spec (remove the section)",
                                   c.program.origin, c.program.spec.first_line - 1, kSpecMarker, c.task_id));
    }
  }

  const eval::EvalOptions options = eval_options_of(o);
  CompilerOptions compiler_options;
  // The compiler runs in its own build folders: a relative cache folder must be made absolute.
  compiler_options.cache_dir = o.cache_dir;
  if (!o.cache_dir.empty() && o.cache_dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == nullptr) throw_io_error("cannot read the current folder", ".");
    compiler_options.cache_dir = std::string(cwd) + "/" + o.cache_dir;
  }
  Compiler compiler(compiler_options);
  const nlohmann::json eval_options = {{"backend", backend_name(options.backend)},
                                       {"scale", options.scale},
                                       {"baseline", options.baseline},
                                       {"precision", std::string(precision_name(options.precision))},
                                       {"trials", options.trials},
                                       {"time_budget_seconds", options.time_budget_seconds},
                                       {"max_relative_ci", options.max_relative_ci},
                                       {"noisy_budget_factor", options.noisy_budget_factor},
                                       {"strict_trials", options.strict_trials},
                                       {"sandbox", options.sandbox},
                                       {"cpu_threads", options.cpu_threads},
                                       {"host_compiler", compiler.host_cxx()},
                                       {"host", hostname()}};
  if (o.resume && o.h5.empty()) throw InputError("--resume needs --h5 FILE: the results file whose verdicts are kept");
  std::vector<std::string> earlier_commits;  // --resume: of the verdicts already in the file
  if (o.resume && std::filesystem::exists(o.h5)) {
    candidates = without_judged(std::move(candidates), o.h5, eval_options, &earlier_commits);
  }
  eval::Evaluator evaluator(options, compiler);

  const bool progress = isatty(STDERR_FILENO) && candidates.size() > 1;
  // On the CPU backend compiles ahead would compete with the timed programs for the same cores.
  const size_t window = static_cast<size_t>(o.compile_ahead >= 0 ? o.compile_ahead : options.backend == Backend::cuda ? 8 : 0);
  std::vector<eval::Evaluator::Job> jobs;
  for (const auto& c : candidates) jobs.push_back({&suite.find(c.task_id), c.program, c.name});
  // The results file is opened before any work (a bad path fails now, not after an hour) and
  // each verdict is appended and flushed as it is made: a killed run keeps every verdict so far.
  std::optional<results::ResultsWriter> writer;
  if (!o.h5.empty()) {
    writer.emplace(o.h5);
    // Where the verdicts came from, for the report and for anyone comparing files later.
    // A resumed file's verdicts may come from several commits: git_commit is this run's, and the
    // others that wrote into the file are kept beside it.
    const std::string commit = git_commit();
    nlohmann::json others = nlohmann::json::array();
    for (const auto& c : earlier_commits) {
      if (c != commit && std::find(others.begin(), others.end(), c) == others.end()) others.push_back(c);
    }
    writer->set_meta("git_commit", commit);
    if (!others.empty()) writer->set_meta_json("earlier_git_commits", others);
    writer->set_meta_json("gpu_names", visible_gpu_names());
    writer->set_meta_json("eval_options", eval_options);
    writer->set_meta("reward_rule", eval::reward_rule(options.max_relative_ci, options.noisy_budget_factor));
    if (!o.slice.empty()) writer->set_meta("eval_slice", o.slice);
    writer->flush();
  }
  size_t written = 0;  // verdicts come in job order
  const std::vector<eval::Verdict> verdicts = evaluator.evaluate_all(
      jobs, window,
      [&](size_t i) {
        if (progress) show_progress(i, candidates.size(), candidates[i].task_id + " " + candidates[i].name);
      },
      [&](const eval::Verdict& v) {
        if (!writer) return;
        eval::append_verdicts(*writer, {v}, {render_program_text(jobs[written++].program)});
        writer->flush();
      });
  if (progress) {
    show_progress(candidates.size(), candidates.size(), "done");
    std::cerr << "\n";
  }
  if (writer) writer->close();
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : verdicts) out.push_back(eval::to_json(v));
    std::cout << out.dump(2) << "\n";
  } else {
    print_table(verdicts);
  }
  if (o.explain && !o.json) {
    std::cout << "\n";
    for (const auto& v : verdicts) print_explanation(v);
  }
  // crl's own failures are not results: said apart from the programs' (on stderr: --json's stdout
  // stays one JSON document), and a run of nothing else is an error, so that a script or a sweep
  // (slurm/eval-array.sbatch marks a slice done on 0 or 1) does not take it for a result.
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
  cmd->add_option("--precision", o.precision,
                  "The float32 math allowed: fp32, or tf32 (TF32 matrix products and convolutions for every program, "
                  "the reference's too, so it earns no speedup; the precision contract's bound follows the reference's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "tf32"}));
  cmd->add_flag("--no-sandbox", o.no_sandbox, "Run candidates without seccomp and Landlock (debugging only)");
  cmd->add_option("--gpu", o.gpu,
                  "Which GPU (an index into those this process sees) the judge and the workers use; they see "
                  "that one alone")
      ->capture_default_str()
      ->check(CLI::Range(0, 1023));
  cmd->add_option("--gpu-memory-fraction", o.gpu_memory_fraction,
                  "Share of the GPU's memory each program's worker (the candidate's, the reference's timing worker) "
                  "may hold in its caching allocator; the judge has 0.3")
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
  cmd->add_option("--slice", o.slice,
                  "I/N: judge only the I-th (from 0) of N equal runs of the sorted candidates (one job array task)");
  cmd->add_option("--cache-dir", o.cache_dir, "Compile cache folder (default: $CRL_CACHE_DIR or ~/.cache/crl/compile)");
  cmd->callback([&exit_code] { exit_code = run_eval(o); });
}

}  // namespace crl::cli
