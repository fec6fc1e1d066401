// `crl data validate IN.jsonl --out OUT.jsonl`: CUDA-L1's stage-1 filter for SFT data. Evaluates
// every line's program ({task, completion} or {task, program}) against its task and writes the
// correct ones, each with its measured speedup, as SFT data for the job's sft stage.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

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
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  const std::vector<rl::SftExample> examples = rl::read_sft_jsonl(o.input);
  std::vector<eval::Evaluator::Job> jobs;
  for (const auto& e : examples) {
    jobs.push_back({&suite.find(e.task), parse_program_text(e.program, fmt::format("{}:{}", o.input, e.line)), e.id});
  }
  eval::EvalOptions options;
  options.backend = o.backend.empty() ? (cuda_device_visible() ? Backend::cuda : Backend::cpu) : parse_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.time_budget_seconds = o.time_budget >= 0 ? o.time_budget : (options.backend == Backend::cuda ? 10 : 3);
  options.cpu_threads = o.cpu_threads;
  options.max_relative_ci = o.max_relative_ci;
  Compiler compiler;
  eval::Evaluator evaluator(options, compiler);
  const bool progress = isatty(STDERR_FILENO) != 0;
  const auto verdicts = evaluator.evaluate_all(jobs, options.backend == Backend::cuda ? 8 : 0, [&](size_t i) {
    if (progress) std::cerr << fmt::format("\r{}/{} {:<60.60}", i, jobs.size(), examples[i].task + " " + examples[i].id) << std::flush;
  });
  if (progress) std::cerr << "\n";
  std::string kept;
  size_t n_kept = 0;
  nlohmann::json report = nlohmann::json::array();
  TextTable table({"line", "task", "status", "speedup", "kept"});
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& v = verdicts[i];
    const bool keep = v.ok();
    if (keep) {
      ++n_kept;
      kept += nlohmann::json{{"task", examples[i].task}, {"completion", examples[i].completion}, {"speedup", v.speedup},
                             {"id", examples[i].id}}.dump() + "\n";
    }
    report.push_back({{"line", examples[i].line}, {"id", examples[i].id}, {"task", examples[i].task}, {"status", v.status_text()},
                      {"speedup", v.speedup}, {"kept", keep}});
    table.add_row({std::to_string(examples[i].line), examples[i].task, v.status_text(), fmt::format("{:.3f}", v.speedup), keep ? "yes" : "no"});
  }
  write_file_atomically(o.out, kept);
  if (o.json) {
    std::cout << nlohmann::json{{"input", o.input}, {"out", o.out}, {"kept", n_kept}, {"total", examples.size()}, {"lines", report}}.dump(2) << "\n";
  } else {
    std::cout << table.str() << fmt::format("kept {} of {} programs in {}\n", n_kept, examples.size(), o.out);
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
