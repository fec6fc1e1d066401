// `crl data validate IN.jsonl --out OUT.jsonl`: CUDA-L1's stage-1 filter for SFT data. Evaluates
// every line's program ({task, completion} or {task, program}) against its task and writes the
// correct ones, each with its measured speedup, as SFT data for the job's sft stage. A line whose
// completion holds no program is reported as format_error and not kept; the others are judged.
// `crl data import IN --out OUT.jsonl`: the field's KernelBench-format programs (CUDA-L1's release,
// a KernelBench-style JSONL of {task, code}) into the same filter, as KernelBench-format SFT data.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "apps/crl/backend_choice.h"
#include "apps/crl/candidates.h"
#include "apps/crl/commands.h"
#include "apps/crl/input_paths.h"
#include "apps/crl/judging.h"
#include "apps/crl/default_job.h"
#include "compile/compiler.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_bounded.h"
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
  bool import = false;  // `crl data import`: input is CUDA-L1's release or {task, code} lines
  int trials = 5;
  double time_budget = -1;
  // The CPU workers' intra-op threads. Default: what each rank of the default job gets (the job
  // gives its evaluators core_share of the node), so the stored speedups are what its evaluators
  // measure; LibTorch's own default (every core) contends on a loaded machine.
  int cpu_threads = core_share(DefaultRunOptions{}.ranks);
  double max_relative_ci = 0.1;  // EvalOptions: a speedup kept with a program rests on an interval this narrow
  std::string kernelbench;       // a KernelBench checkout: KernelBench's rule for parameters (EvalOptions::kernelbench_dir)
  std::string h5;                // every verdict also into this results file, flushed as it is made
  bool json = false;
};

// One row of an imported file as the filter reads it: {task, program, format: kernelbench, id}.
struct ImportedRow {
  std::string task, program, id;
};

// CUDA-L1's release (optimized_cuda_code/<gpu>.json: JSON lines of {level_id, task_id, custom_code,
// ...}, task_id KernelBench's problem number) or {task, code} lines (task a crl task id). Rows
// without code are counted, not imported. Throws InputError naming file:line for a row of neither
// layout or a task the suite lacks.
std::vector<ImportedRow> read_import_rows(const std::string& path, const Suite& suite, size_t* without_code) {
  std::ifstream in(path);
  if (!in) throw_io_error("cannot read the file to import", path);
  std::vector<ImportedRow> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    const nlohmann::json j = parse_json_bounded(line, where);
    if (!j.is_object()) throw InputError(where + ": not a JSON object");
    ImportedRow row;
    const char* code_key = nullptr;
    if (j.contains("level_id") && j.contains("task_id")) {
      if (!j["level_id"].is_number_integer() || !j["task_id"].is_number_integer()) {
        throw InputError(where + ": CUDA-L1's 'level_id' and 'task_id' must be integers");
      }
      const std::string prefix = fmt::format("level{}/{:03d}_", j["level_id"].get<int64_t>(), j["task_id"].get<int64_t>());
      for (const Task& t : suite.tasks()) {
        if (t.spec.id.rfind(prefix, 0) == 0) row.task = t.spec.id;
      }
      if (row.task.empty()) throw InputError(fmt::format("{}: the suite has no task {}* (CUDA-L1's level {} task {})", where, prefix,
                                                         j["level_id"].get<int64_t>(), j["task_id"].get<int64_t>()));
      row.id = fmt::format("{}:{}", std::filesystem::path(path).filename().string(), row.task);
      code_key = "custom_code";
    } else if (j.contains("task") && j.contains("code")) {
      if (!j["task"].is_string()) throw InputError(where + ": field 'task' must be a string");
      row.task = j["task"].get<std::string>();
      (void)suite.find(row.task);  // an unknown task is bad input, before any work
      row.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : fmt::format("line {}", number);
      code_key = "code";
    } else {
      throw InputError(where + ": expected CUDA-L1's {level_id, task_id, custom_code} or {task, code}");
    }
    const auto& code = j[code_key];
    // No code: null, blank, or the text "None" (CUDA-L1's release writes Python's None as a string
    // in 17 of its H100 rows).
    const auto blank_or_none = [](std::string text) {
      text.erase(0, std::min(text.find_first_not_of(" \t\r\n"), text.size()));
      text.erase(text.find_last_not_of(" \t\r\n") + 1);
      return text.empty() || text == "None";
    };
    if (code.is_null() || (code.is_string() && blank_or_none(code.get<std::string>()))) {
      ++*without_code;
      continue;
    }
    if (!code.is_string()) throw InputError(fmt::format("{}: field '{}' must be a string", where, code_key));
    row.program = code.get<std::string>();
    rows.push_back(std::move(row));
  }
  return rows;
}

int run_validate(const ValidateOptions& o) {
  refuse_unasked_append({o.h5, false, false});  // before any work
  eval::EvalOptions options;
  options.backend = choose_backend(o.backend);
  options.scale = o.scale.empty() ? (options.backend == Backend::cuda ? "full" : "small") : o.scale;
  options.trials = o.trials;
  options.time_budget_seconds = o.time_budget >= 0 ? o.time_budget : (options.backend == Backend::cuda ? 10 : 3);
  options.cpu_threads = o.cpu_threads;
  options.max_relative_ci = o.max_relative_ci;
  options.kernelbench_dir = o.kernelbench;
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));  // before the import: its rows name tasks
  // Raw model output: a line without a program is that line's format_error (candidates.h), not
  // the end of the filter; a line that is no JSON object of {task, completion or program} is bad input.
  // An import is first written as such lines (KernelBench-format programs) beside the output.
  std::string input = o.input;
  size_t without_code = 0;
  if (o.import) {
    std::string lines;
    for (const auto& row : read_import_rows(o.input, suite, &without_code)) {
      lines += nlohmann::json{{"task", row.task}, {"program", row.program}, {"format", "kernelbench"}, {"id", row.id}}.dump() + "\n";
    }
    input = o.out + ".import.jsonl";
    write_file_atomically(input, lines);
  }
  std::vector<Candidate> examples = read_candidates_jsonl(input);
  check_candidates_against(suite, examples);
  Compiler compiler;
  eval::Evaluator evaluator(options, compiler);
  // With --h5 every verdict is flushed as it is made: a run cut short (a GPU call's limit) keeps
  // what it judged, where the JSONL and the report come only at the end.
  std::optional<results::ResultsWriter> writer;
  if (!o.h5.empty()) {
    writer.emplace(o.h5);
    write_results_meta(*writer, options, eval_options_json(options, compiler), {});
  }
  const size_t compile_ahead = options.backend == Backend::cuda ? 8 : 0;  // compiles on the CPU while the GPU times
  const std::vector<eval::Verdict> verdicts =
      judge_candidates(examples, {suite, evaluator, compile_ahead, writer ? &*writer : nullptr, nullptr, "crl data"});
  if (writer) writer->close();
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
                      {"format", program_kind_name(examples[i].kind)}, {"params", v.params}, {"status", v.status_text()},
                      {"speedup", v.speedup},
                      {"kept", keep}, {"message", v.message}});
    table.add_row({std::to_string(examples[i].line), examples[i].task_id, v.status_text(), fmt::format("{:.3f}", v.speedup), keep ? "yes" : "no"});
    if (v.status == eval::VerdictStatus::kFormatError) unparsed.push_back(v.message);
  }
  write_file_atomically(o.out, kept);
  if (o.json) {
    nlohmann::json out{{"input", o.input}, {"out", o.out}, {"kept", n_kept}, {"total", examples.size()}, {"lines", report}};
    if (o.import) {
      out["imported"] = input;
      out["without_code"] = without_code;
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << table.str();
    for (const auto& why : unparsed) std::cout << "format_error: " << why << "\n";
    std::cout << fmt::format("kept {} of {} programs in {}\n", n_kept, examples.size(), o.out);
    if (o.import) {
      std::cout << fmt::format("imported {} programs as KernelBench-format lines into {} ({} rows without code skipped)\n",
                               examples.size(), input, without_code);
    }
  }
  return kExitOk;
}

}  // namespace

namespace {

// The options validate and import share: where the tasks are, how each program is judged, --json.
void add_filter_options(CLI::App* command, ValidateOptions& o) {
  command->add_option("--suite", o.suite_dir, "Task suite folder (default: $CRL_SUITE_DIR or the source tree's jobs/suite)");
  command->add_option("--backend", o.backend, "cpu or cuda (default: cuda when a GPU is visible)");
  command->add_option("--scale", o.scale, "small or full (default: full on cuda, small on cpu)");
  command->add_option("--trials", o.trials, "Correctness trials per program")->capture_default_str();
  command->add_option("--time-budget", o.time_budget, "Seconds of timing per program (default 10 cuda, 3 cpu)");
  command->add_option("--max-relative-ci", o.max_relative_ci,
                      "The widest 95% interval of a speedup (relative half width) a kept program's speedup may rest on; "
                      "a program measured wider is internal_error (machine too noisy) and not kept")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 100.0));
  command->add_option("--cpu-threads", o.cpu_threads, "Intra-op threads of the CPU workers (default: a default-job rank's share of the cores)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_kernelbench_option(command, o.kernelbench);
  command->add_option("--h5", o.h5,
                      "Also append every verdict to this HDF5 results file (table verdicts) as it is made, flushed: a run cut "
                      "short keeps what it judged (an existing file is refused)");
  command->add_flag("--json", o.json, "Print the per-line report as JSON");
}

}  // namespace

void add_data_command(CLI::App& app, int& exit_code) {
  auto* data = app.add_subcommand("data", "SFT data tools");
  data->require_subcommand(1);
  auto o = std::make_shared<ValidateOptions>();
  auto* validate = data->add_subcommand("validate", "Evaluate every program of a JSONL file; keep the correct ones with their speedups");
  validate->add_option("input", o->input, "JSONL of {task, completion} or {task, program}")->required()->check(existing_input(PathKind::file, "input"));
  validate->add_option("--out", o->out, "JSONL of the correct ones, {task, completion, speedup, id}")->required();
  add_filter_options(validate, *o);
  validate->callback([&exit_code, o] { exit_code = run_validate(*o); });

  auto im = std::make_shared<ValidateOptions>();
  im->import = true;
  auto* import = data->add_subcommand(
      "import", "Judge the field's KernelBench-format programs (CUDA-L1's release, {task, code} lines); keep the correct ones as SFT data");
  import->add_option("input", im->input,
                     "CUDA-L1's optimized_cuda_code/<gpu>.json (JSON lines of {level_id, task_id, custom_code}) or JSON lines of "
                     "{task, code}")
      ->required()
      ->check(existing_input(PathKind::file, "input"));
  import->add_option("--out", im->out,
                     "JSONL of the correct ones, {task, completion, format: kernelbench, speedup, id}; OUT.import.jsonl gets every "
                     "imported program as crl eval reads it")
      ->required();
  add_filter_options(import, *im);
  import->callback([&exit_code, im] { exit_code = run_validate(*im); });
}

}  // namespace crl::cli
