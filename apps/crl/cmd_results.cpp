// `crl results`: tools for results files as a whole.
//   crl results merge OUT.h5 PART.h5...   join the parts (an eval sweep's array tasks) into one new file,
//                                         ids kept unique, every part's /meta kept (lib/results/results_merge.h)
//   crl results best RUN.h5 --out best.jsonl [--top N]
//                                         each task's N fastest correct programs of a run (its /rollouts),
//                                         as the JSONL `crl eval` reads (slurm/cross-gpu.sbatch)
// A summary on the terminal, --json for scripts; exit 0 when merged, 3 for bad input.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <iostream>
#include <map>
#include <set>

#include "apps/crl/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text_table.h"
#include "results/results_merge.h"
#include "results/results_reader.h"

namespace crl::cli {
namespace {

struct MergeCommandOptions {
  std::string out;
  std::vector<std::string> parts;
  bool json = false;
};

int run_merge(const MergeCommandOptions& o) {
  const bool progress = isatty(STDERR_FILENO) && o.parts.size() > 1;
  const auto summary = results::merge_results_files(
      o.out, o.parts, [&](std::size_t done, std::size_t total, const results::MergedPart& part) {
        if (progress) std::cerr << fmt::format("\rmerged {}/{}: {:<60.60}", done, total, part.path) << std::flush;
      });
  if (progress) std::cerr << "\n";
  if (o.json) {
    std::cout << results::to_json(summary).dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"part", "id offset", "rows"});
  for (const auto& p : summary.parts) {
    std::string rows;
    for (const auto& [name, n] : p.rows) rows += fmt::format("{}{} {}", rows.empty() ? "" : ", ", name, n);
    table.add_row({p.path, std::to_string(p.id_offset), rows.empty() ? "-" : rows});
  }
  std::cout << table.str();
  std::string total;
  for (const auto& [name, n] : summary.rows) total += fmt::format("{}{} {}", total.empty() ? "" : ", ", name, n);
  std::cout << fmt::format("{}: {} parts merged ({})\n", summary.path, summary.parts.size(),
                           total.empty() ? "no rows" : total);
  return kExitOk;
}

struct BestCommandOptions {
  std::string run;
  std::string out;
  int top = 1;
  bool json = false;
};

struct BestProgram {
  std::string task;
  std::int64_t rollout_id = 0;
  double speedup = 0;
  std::string program;
};

// Per task, the `top` correct rollouts with the highest measured speedup (a superseded rollout, one
// a restart re-did, never counts); ties go to the earlier rollout.
std::vector<BestProgram> best_programs(const results::ResultsReader& reader, int top) {
  const auto tables = reader.tables();
  if (std::find(tables.begin(), tables.end(), "rollouts") == tables.end()) {
    throw InputError(fmt::format("{}: no /rollouts table (an eval file?): give a run's results.h5", reader.path()));
  }
  // Every column read below, with its type, before any is read.
  reader.validate({.tables = {{.table = "rollouts",
                               .columns = {{"task", results::ColumnType::string},
                                           {"status", results::ColumnType::string},
                                           {"speedup", results::ColumnType::float64},
                                           {"rollout_id", results::ColumnType::int64}},
                               .optional = {{"superseded", results::ColumnType::boolean}}}}});
  const auto task = reader.column_as<std::string>("rollouts", "task");
  const auto status = reader.column_as<std::string>("rollouts", "status");
  const auto speedup = reader.column_as<double>("rollouts", "speedup");
  const auto id = reader.column_as<std::int64_t>("rollouts", "rollout_id");
  std::vector<bool> superseded(task.size(), false);
  const auto schema = reader.schema("rollouts");
  if (std::any_of(schema.begin(), schema.end(), [](const auto& c) { return c.name == "superseded"; })) {
    superseded = reader.column_as<bool>("rollouts", "superseded");
  }
  std::map<std::string, std::vector<BestProgram>> by_task;
  for (std::size_t i = 0; i < task.size(); ++i) {
    if (status[i] == "ok" && !superseded[i]) by_task[task[i]].push_back({task[i], id[i], speedup[i], {}});
  }
  std::vector<BestProgram> out;
  for (auto& [name, candidates] : by_task) {
    std::stable_sort(candidates.begin(), candidates.end(), [](const BestProgram& a, const BestProgram& b) {
      return a.speedup != b.speedup ? a.speedup > b.speedup : a.rollout_id < b.rollout_id;
    });
    for (std::size_t k = 0; k < candidates.size() && k < static_cast<std::size_t>(top); ++k) {
      auto program = reader.text("programs", candidates[k].rollout_id);
      if (!program) continue;  // a correct rollout always has its program; a damaged file may not
      candidates[k].program = std::move(*program);
      out.push_back(std::move(candidates[k]));
    }
  }
  return out;
}

int run_best(const BestCommandOptions& o) {
  const results::ResultsReader reader(o.run);
  const auto best = best_programs(reader, o.top);
  std::ostringstream file;
  nlohmann::json summary = nlohmann::json::array();
  TextTable table({"task", "rollout", "speedup"});
  for (const auto& b : best) {
    file << nlohmann::json{{"task", b.task}, {"program", b.program}, {"id", fmt::format("rollout {}", b.rollout_id)},
                           {"speedup", b.speedup}}
                .dump()
         << "\n";
    summary.push_back({{"task", b.task}, {"rollout_id", b.rollout_id}, {"speedup", b.speedup}});
    table.add_row({b.task, std::to_string(b.rollout_id), fmt::format("{:.3f}", b.speedup)});
  }
  // Whole or not at all; a folder or a missing folder as --out is an IoError with its errno (exit 3).
  write_file_atomically(o.out, file.str());
  if (o.json) {
    std::cout << nlohmann::json{{"run", o.run}, {"out", o.out}, {"programs", summary}}.dump(2) << "\n";
  } else {
    std::set<std::string> tasks;
    for (const auto& p : best) tasks.insert(p.task);
    std::cout << table.str() << fmt::format("{}: {} programs of {} tasks\n", o.out, best.size(), tasks.size());
  }
  return best.empty() ? kExitFailure : kExitOk;
}

}  // namespace

void add_results_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("results", "Tools for crl results files (HDF5) as a whole");
  cmd->require_subcommand(1);
  auto* merge = cmd->add_subcommand(
      "merge", "Join results files (an eval sweep's parts) into a new one: ids kept unique, every part's /meta kept");
  static MergeCommandOptions o;
  merge->add_option("out", o.out, "The merged file to write (must not exist)")->required();
  merge->add_option("parts", o.parts, "The results files to join, in order")->required();
  merge->add_flag("--json", o.json, "Print the summary (parts, id offsets, rows per table) as JSON");
  merge->callback([&exit_code] { exit_code = run_merge(o); });

  auto* best = cmd->add_subcommand(
      "best", "Each task's fastest correct programs of a run, as a JSONL for crl eval (cross-GPU re-evaluation)");
  static BestCommandOptions b;
  best->add_option("run", b.run, "A run's results file (crl run's results.h5)")->required();
  best->add_option("--out", b.out, "The JSONL of {task, program, id, speedup} to write")->required();
  best->add_option("--top", b.top, "Programs per task, fastest first")->capture_default_str()->check(CLI::Range(1, 1000));
  best->add_flag("--json", b.json, "Print the chosen programs (task, rollout id, speedup) as JSON");
  best->callback([&exit_code] { exit_code = run_best(b); });
}

}  // namespace crl::cli
