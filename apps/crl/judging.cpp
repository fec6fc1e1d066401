// Judging many candidates into a results file, for `crl eval` and `crl eval-model` (judging.h).
#include "apps/crl/judging.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "apps/crl/backend_choice.h"
#include "apps/crl/input_paths.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/process_env.h"
#include "core/provenance.h"
#include "core/text_table.h"
#include "eval/verdict_table.h"
#include "eval/verdict_why.h"
#include "machine/gpu_names.h"
#include "program/program_text.h"
#include "program/run_settings.h"
#include "results/results_reader.h"

namespace crl::cli {

void add_kernelbench_option(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--kernelbench", dir,
                  "A KernelBench checkout: KernelBench's rule for parameters (every call's params are the values of the task's "
                  "Model built under one secret seed; a KernelBench-format ModelNew is built under the same seed and keeps "
                  "its own); default: crl's rule (fresh values every call, given to ModelNew by order and shape)")
      ->check(existing_input(PathKind::directory, "--kernelbench"));
}

void add_judge_options(CLI::App* cmd, JudgeOptions& o) {
  cmd->add_option("--suite,--suite-dir", o.suite_dir, "The task suite folder (default: $CRL_SUITE_DIR or the source tree's)");
  cmd->add_option("--backend", o.backend, "cpu or cuda (default: cuda when a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--scale", o.scale, "small or full (default: small on cpu, full on cuda)");
  cmd->add_option("--trials", o.trials, "Correctness trials, each on inputs from a new seed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--time-budget", o.time_budget, "Seconds of timing per candidate (default: 3 on cpu, 10 on cuda)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_flag("--no-timing", o.no_timing, "Check correctness only");
  cmd->add_option("--cpu-threads", o.cpu_threads,
                  "Intra-op threads of the CPU backend's workers (default 0: LibTorch's, every core; with "
                  "--call-turns, one core less, left to the evaluator, which serves the turns)")
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
                  "How the reference is timed: eager (called, as KernelBench times it), cuda_graph (each call "
                  "captured once and replayed: what a user would try before writing kernels; CUDA only), or kernelbench "
                  "(the task's KernelBench module itself, from Python, with --kernelbench: what a KernelBench-format "
                  "candidate's Python overhead is weighed against; correctness is still crl's reference's)")
      ->check(CLI::IsMember({"eager", "cuda_graph", "kernelbench"}));
  cmd->add_option("--precision", o.precision,
                  "The float32 math allowed: fp32, or tf32 (TF32 matrix products and convolutions for every program, "
                  "the reference's too, so it earns no speedup; the precision contract's bound follows the reference's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "tf32"}));
  add_kernelbench_option(cmd, o.kernelbench);
  cmd->add_flag("--no-sandbox", o.no_sandbox, "Run candidates without seccomp and Landlock (debugging only)");
  cmd->add_flag("--call-turns", o.call_turns,
                "CPU backend: the calls of a timed batch take turns, so none can read a later call's inputs or leave "
                "its work to a later call (precise on a quiet machine; too noisy under parallel load: docs/evaluation.md)");
  cmd->add_option("--gpu", o.gpu,
                  "Which GPU (an index into those this process sees) the judge and the workers use; they see "
                  "that one alone")
      ->capture_default_str()
      ->check(CLI::Range(0, 1023));
  cmd->add_option("--gpu-memory-fraction", o.gpu_memory_fraction,
                  "Share of the GPU's memory the candidate's worker may hold (its input arena and caching allocator), "
                  "for every task; 0 (the default): planned per task with the judge's and the reference worker's, "
                  "from the reference's measured call, within 0.95 of the card (docs/evaluation.md, GPU memory)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--reference-gpu-memory-fraction", o.reference_gpu_memory_fraction,
                  "Share of the GPU's memory the reference's timing worker may hold, for every task; 0 (the default): planned")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--judge-gpu-memory-fraction", o.judge_gpu_memory_fraction,
                  "Share of the GPU's memory the judge may hold, for every task; 0 (the default): planned")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--compile-ahead", o.compile_ahead,
                  "Candidates compiled ahead of the one being judged (default: 8 on CUDA, 0 on the CPU)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-dir", o.cache_dir, "Compile cache folder (default: $CRL_CACHE_DIR or ~/.cache/crl/compile)");
}

void add_results_file_options(CLI::App* cmd, ResultsFileOptions& o, const std::string& what) {
  cmd->add_option("--h5", o.h5, "Append the verdicts to this HDF5 results file (table 'verdicts')");
  cmd->add_flag("--resume", o.resume,
                fmt::format("With --h5: judge only the {} the file holds no verdict of (by task and name), after "
                            "checking it was judged with the same backend, scale, baseline, trials, time budget and noise "
                            "limit (--max-relative-ci)",
                            what));
  cmd->add_flag("--append", o.append,
                fmt::format("With --h5: add these verdicts to a file that holds verdicts already (without --resume or "
                            "--append an existing file is refused: the same {} judged twice would sit in it twice)",
                            what));
}

eval::EvalOptions eval_options_of(const JudgeOptions& o, uint64_t seed) {
  eval::EvalOptions options;
  options.backend = choose_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.seed = seed;
  options.timing = !o.no_timing;
  options.remeasure_above_speedup = o.remeasure_above;
  options.max_relative_ci = o.max_relative_ci;
  options.sandbox = !o.no_sandbox;
  options.call_turns = o.call_turns;
  options.baseline = o.baseline;
  options.precision = parse_precision(o.precision);
  options.kernelbench_dir = o.kernelbench;
  options.cpu_threads = o.cpu_threads;
  options.gpu_memory_fraction = o.gpu_memory_fraction;
  options.reference_gpu_memory_fraction = o.reference_gpu_memory_fraction;
  options.judge_gpu_memory_fraction = o.judge_gpu_memory_fraction;
  options.gpu = o.gpu;
  if (o.time_budget >= 0) {
    options.time_budget_seconds = o.time_budget;
  } else {
    options.time_budget_seconds = options.backend == Backend::cuda ? 10 : 3;
  }
  return options;
}

nlohmann::json eval_options_json(const eval::EvalOptions& options, const Compiler& compiler) {
  return {{"backend", backend_name(options.backend)},
          {"scale", options.scale},
          {"baseline", options.baseline},
          {"precision", std::string(precision_name(options.precision))},
          {"params", eval::params_rule_name(options)},
          {"kernelbench", options.kernelbench_dir},
          {"trials", options.trials},
          {"time_budget_seconds", options.time_budget_seconds},
          {"max_relative_ci", options.max_relative_ci},
          {"noisy_budget_factor", options.noisy_budget_factor},
          {"strict_trials", options.strict_trials},
          {"sandbox", options.sandbox},
          {"cpu_threads", options.cpu_threads},
          {"call_turns", options.call_turns},
          {"host_compiler", compiler.host_cxx()},
          {"host", hostname()}};
}

std::string absolute_cache_dir(const std::string& dir) {
  if (dir.empty() || dir[0] == '/') return dir;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw_io_error("cannot read the current folder", ".");
  return std::string(cwd) + "/" + dir;
}

size_t compile_window(const JudgeOptions& o, const eval::EvalOptions& options) {
  return static_cast<size_t>(o.compile_ahead >= 0 ? o.compile_ahead : options.backend == Backend::cuda ? 8 : 0);
}

void refuse_unasked_append(const ResultsFileOptions& o) {
  if (o.resume && o.append) throw InputError("--resume and --append: give one (--resume skips what the file holds, --append judges all again)");
  if ((o.resume || o.append) && o.h5.empty()) {
    throw InputError(fmt::format("{} needs --h5 FILE: the results file whose verdicts are kept", o.resume ? "--resume" : "--append"));
  }
  std::error_code ec;
  if (o.h5.empty() || o.resume || o.append || !std::filesystem::exists(o.h5, ec) || std::filesystem::is_directory(o.h5, ec)) return;
  throw InputError(fmt::format("{}: the results file exists; give --resume to judge only what it holds no verdict of, "
                               "--append to add these verdicts beside its own, or another --h5 file",
                               o.h5));
}

bool JudgedVerdicts::take(const std::string& task, const std::string& candidate) {
  auto it = counts.find({task, candidate});
  if (it == counts.end() || it->second <= 0) return false;
  --it->second;
  return true;
}

JudgedVerdicts read_judged_verdicts(const std::string& path, const nlohmann::json& eval_options) {
  const results::ResultsReader reader(path);
  reader.validate({.tables = {{.table = "verdicts",
                               .columns = {{"task", results::ColumnType::string},
                                           {"candidate", results::ColumnType::string},
                                           {"status", results::ColumnType::string}}}},
                   .meta = {{.key = "earlier_git_commits", .shape = results::MetaShape::json_string_list},
                            {.key = "eval_options", .shape = results::MetaShape::json_object}}});
  JudgedVerdicts out;
  const auto keys = reader.meta_keys();
  const auto has = [&](const char* key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  if (has("earlier_git_commits")) {
    for (const auto& c : reader.meta_json("earlier_git_commits")) out.commits.push_back(c.get<std::string>());
  }
  if (has("git_commit")) out.commits.push_back(reader.meta("git_commit"));
  if (has("eval_options")) {
    const nlohmann::json before = reader.meta_json("eval_options");
    for (const std::string key : {"backend", "scale", "baseline", "precision", "params", "trials", "time_budget_seconds"}) {
      // A file from before the params rule was recorded was judged by crl's; one from before the
      // precision contract held outputs to another rule, so its verdicts must not sit beside these.
      const nlohmann::json was = before.contains(key) ? before.at(key)
                                 : key == "params"    ? nlohmann::json("crl")
                                 : key == "precision" ? nlohmann::json("none (judged before the precision contract)")
                                                      : eval_options.at(key);
      if (was != eval_options.at(key)) {
        throw InputError(fmt::format("--resume: {} was judged with {} {}, this run asks for {}; give another --h5 file",
                                     path, key, was.dump(), eval_options.at(key).dump()));
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
  if (std::find(tables.begin(), tables.end(), "verdicts") == tables.end()) return out;
  const auto tasks = reader.column_as<std::string>("verdicts", "task");
  const auto names = reader.column_as<std::string>("verdicts", "candidate");
  const auto statuses = reader.column_as<std::string>("verdicts", "status");
  for (size_t i = 0; i < tasks.size() && i < names.size() && i < statuses.size(); ++i) {
    if (statuses[i] == "internal_error") {
      ++out.internal_errors;
    } else {
      ++out.counts[{tasks[i], names[i]}];
    }
  }
  return out;
}

void write_results_meta(results::ResultsWriter& writer, const eval::EvalOptions& options, const nlohmann::json& eval_options,
                        const std::vector<std::string>& earlier_commits) {
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
  writer.flush();
}

std::string progress_text(size_t done, size_t total, std::chrono::steady_clock::time_point start, const std::string& unit) {
  const double seconds = seconds_since(start);
  const double per_minute = seconds > 0 && done > 0 ? 60.0 * static_cast<double>(done) / seconds : 0;
  const double eta = per_minute > 0 ? 60.0 * static_cast<double>(total - std::min(done, total)) / per_minute : NAN;
  return fmt::format("{} {}/{}, {:.1f}/min, ETA {}", unit, done, total, per_minute, duration_text(eta));
}

namespace {

void show_progress(size_t done, size_t total, std::chrono::steady_clock::time_point start, const std::string& what) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
  std::cerr << fmt::format("\r[{}{}] {} {:<40.40}", std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(kWidth - filled), ' '), progress_text(done, total, start, "judged"),
                           what)
            << std::flush;
}

}  // namespace

std::vector<eval::Verdict> judge_candidates(const std::vector<Candidate>& candidates, const JudgeRun& run) {
  std::vector<eval::Verdict> verdicts(candidates.size());
  std::vector<eval::Evaluator::Job> jobs;
  std::vector<size_t> job_candidate;  // the candidate each job judges
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (c.program) {
      jobs.push_back({&run.suite.find(c.task_id), *c.program, c.name});
      job_candidate.push_back(i);
    } else {
      verdicts[i] = format_error_verdict(c, run.evaluator.options());
    }
  }
  size_t written = 0;  // candidates whose verdicts are in the file
  const auto write_up_to = [&](size_t end) {
    for (; run.writer != nullptr && written < end; ++written) {
      const Candidate& c = candidates[written];
      const int64_t row =
          eval::append_verdicts(*run.writer, {verdicts[written]}, {c.program ? render_program_text(*c.program) : c.text});
      if (run.after_write) run.after_write(written, row);
      run.writer->flush();
    }
  };
  const bool progress = isatty(STDERR_FILENO) && candidates.size() > 1;
  const bool log_lines = !isatty(STDERR_FILENO) && jobs.size() > 1;
  const size_t every = jobs.size() < 20 ? 1 : jobs.size() / 10;
  const auto start = std::chrono::steady_clock::now();
  size_t judged = 0;  // verdicts come in job order
  if (!jobs.empty()) {
    run.evaluator.evaluate_all(
        jobs, run.window,
        [&](size_t j) {
          const Candidate& c = candidates[job_candidate[j]];
          if (progress) show_progress(job_candidate[j], candidates.size(), start, c.task_id + " " + c.name);
        },
        [&](const eval::Verdict& v) {
          const size_t i = job_candidate[judged++];
          verdicts[i] = v;
          write_up_to(i + 1);
          if (log_lines && (judged % every == 0 || judged == jobs.size())) {
            // (the name ends the line: tables and --explain put a space or a colon after a name)
            std::cerr << fmt::format("{}: {}; {}: {} {}\n", run.command, progress_text(judged, jobs.size(), start, "judged"),
                                     v.status_text(), candidates[i].task_id, candidates[i].name);
          }
        });
  }
  write_up_to(candidates.size());
  if (progress) {
    show_progress(candidates.size(), candidates.size(), start, "done");
    std::cerr << "\n";
  }
  return verdicts;
}

namespace {

std::string times_text(const eval::TimeSummary& t) {
  return t.samples > 0 ? fmt::format("{:.1f} ±{:.1f}", t.median_us, t.iqr_us / 2) : "-";
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

}  // namespace

void print_verdicts(const std::vector<eval::Verdict>& verdicts) {
  print_table(verdicts);
  print_reasons(verdicts);
}

InternalErrors report_internal_errors(const std::vector<eval::Verdict>& verdicts, const std::string& command) {
  const auto is_internal = [](const eval::Verdict& v) { return v.status == eval::VerdictStatus::kInternalError; };
  const auto internal = static_cast<size_t>(std::count_if(verdicts.begin(), verdicts.end(), is_internal));
  if (internal > 0) {
    const auto first = std::find_if(verdicts.begin(), verdicts.end(), is_internal);
    // Its message and the start of the log it carries (the worker's own words are the cause).
    std::string why = first->message.substr(0, 500);
    std::replace(why.begin(), why.end(), '\n', ' ');
    std::cerr << fmt::format("{}: {} of {} verdicts are internal_error, crl's own failure and not the programs' "
                             "(judge them again; `crl doctor` checks this machine); the first, {} ({}): {}\n",
                             command, internal, verdicts.size(), first->candidate, first->task_id, why);
  }
  return {internal, internal > 0 && internal == verdicts.size()};
}

}  // namespace crl::cli
