// `crl data validate IN.jsonl --out OUT.jsonl`: CUDA-L1's stage-1 filter for SFT data. Evaluates
// every line's program ({task, completion} or {task, program}) against its task and writes the
// correct ones, each with its measured speedup, as SFT data for the job's sft stage. A line whose
// completion holds no program is reported as format_error and not kept; the others are judged.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "apps/crl/backend_choice.h"
#include "apps/crl/candidates.h"
#include "apps/crl/commands.h"
#include "apps/crl/input_paths.h"
#include "apps/crl/default_job.h"
#include "compile/compiler.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/process_env.h"
#include "core/text_table.h"
#include "eval/evaluator.h"
#include "machine/machine_probe.h"
#include "rl/sft_data.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

struct ValidateOptions {
  std::string input, out, suite_dir, backend, scale;
  int trials = 5;
  double time_budget = -1;
  // The CPU workers' intra-op threads. Default: what each rank of the default job gets (the job
  // gives its evaluators core_share of the node), so the stored speedups are what its evaluators
  // measure; LibTorch's own default (every core) contends on a loaded machine.
  int cpu_threads = core_share(DefaultRunOptions{}.ranks);
  double max_relative_ci = 0.1;  // EvalOptions: a speedup kept with a program rests on an interval this narrow
  bool json = false;
};

int run_validate(const ValidateOptions& o) {
  eval::EvalOptions options;
  options.backend = choose_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.time_budget_seconds = o.time_budget >= 0 ? o.time_budget : (options.backend == Backend::cuda ? 10 : 3);
  options.cpu_threads = o.cpu_threads;
  options.max_relative_ci = o.max_relative_ci;
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  // Raw model output: a line without a program is that line's format_error (candidates.h), not
  // the end of the filter; a line that is no JSON object of {task, completion or program} is bad input.
  std::vector<Candidate> examples = read_candidates_jsonl(o.input);
  check_candidates_against(suite, examples);
  Compiler compiler;
  eval::Evaluator evaluator(options, compiler);
  std::vector<eval::Evaluator::Job> jobs;
  std::vector<size_t> job_line;  // the example each job judges
  std::vector<eval::Verdict> verdicts(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    if (examples[i].program) {
      jobs.push_back({&suite.find(examples[i].task_id), *examples[i].program, examples[i].name});
      job_line.push_back(i);
    } else {
      verdicts[i] = format_error_verdict(examples[i], options);
    }
  }
  const bool progress = isatty(STDERR_FILENO) != 0;
  const auto judged = evaluator.evaluate_all(jobs, options.backend == Backend::cuda ? 8 : 0, [&](size_t j) {
    const Candidate& e = examples[job_line[j]];
    if (progress) std::cerr << fmt::format("\r{}/{} {:<60.60}", j, jobs.size(), e.task_id + " " + e.name) << std::flush;
  });
  if (progress) std::cerr << "\n";
  for (size_t j = 0; j < judged.size(); ++j) verdicts[job_line[j]] = judged[j];
  std::string kept;
  size_t n_kept = 0;
  nlohmann::json report = nlohmann::json::array();
  TextTable table({"line", "task", "status", "speedup", "kept"});
  std::vector<std::string> unparsed;  // why each format_error line holds no program
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& v = verdicts[i];
    const bool keep = v.ok();
    if (keep) {
      ++n_kept;
      nlohmann::json line{{"task", examples[i].task_id}, {"completion", examples[i].completion}, {"speedup", v.speedup},
                          {"id", examples[i].name}};
      if (examples[i].kind != ProgramKind::crl) line["format"] = program_kind_name(examples[i].kind);
      kept += line.dump() + "\n";
    }
    report.push_back({{"line", examples[i].line}, {"id", examples[i].name}, {"task", examples[i].task_id},
                      {"format", program_kind_name(examples[i].kind)}, {"status", v.status_text()}, {"speedup", v.speedup},
                      {"kept", keep}, {"message", v.message}});
    table.add_row({std::to_string(examples[i].line), examples[i].task_id, v.status_text(), fmt::format("{:.3f}", v.speedup), keep ? "yes" : "no"});
    if (v.status == eval::VerdictStatus::kFormatError) unparsed.push_back(v.message);
  }
  write_file_atomically(o.out, kept);
  if (o.json) {
    std::cout << nlohmann::json{{"input", o.input}, {"out", o.out}, {"kept", n_kept}, {"total", examples.size()}, {"lines", report}}.dump(2) << "\n";
  } else {
    std::cout << table.str();
    for (const auto& why : unparsed) std::cout << "format_error: " << why << "\n";
    std::cout << fmt::format("kept {} of {} programs in {}\n", n_kept, examples.size(), o.out);
  }
  return kExitOk;
}

}  // namespace

void add_data_command(CLI::App& app, int& exit_code) {
  auto* data = app.add_subcommand("data", "SFT data tools");
  data->require_subcommand(1);
  auto o = std::make_shared<ValidateOptions>();
  auto* validate = data->add_subcommand("validate", "Evaluate every program of a JSONL file; keep the correct ones with their speedups");
  validate->add_option("input", o->input, "JSONL of {task, completion} or {task, program}")->required()->check(existing_input(PathKind::file, "input"));
  validate->add_option("--out", o->out, "JSONL of the correct ones, {task, completion, speedup, id}")->required();
  validate->add_option("--suite", o->suite_dir, "Task suite folder (default: $CRL_SUITE_DIR or the source tree's jobs/suite)");
  validate->add_option("--backend", o->backend, "cpu or cuda (default: cuda when a GPU is visible)");
  validate->add_option("--scale", o->scale, "small or full (default: full on cuda, small on cpu)");
  validate->add_option("--trials", o->trials, "Correctness trials per program")->capture_default_str();
  validate->add_option("--time-budget", o->time_budget, "Seconds of timing per program (default 10 cuda, 3 cpu)");
  validate->add_option("--max-relative-ci", o->max_relative_ci,
                       "The widest 95% interval of a speedup (relative half width) a kept program's speedup may rest on; "
                       "a program measured wider is internal_error (machine too noisy) and not kept")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 100.0));
  validate->add_option("--cpu-threads", o->cpu_threads, "Intra-op threads of the CPU workers (default: a default-job rank's share of the cores)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  validate->add_flag("--json", o->json, "Print the per-line report as JSON");
  validate->callback([&exit_code, o] { exit_code = run_validate(*o); });
}

}  // namespace crl::cli
