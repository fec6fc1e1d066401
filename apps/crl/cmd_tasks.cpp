// `crl tasks list|show|check`: the task suite's tasks, one task's reference program, and the check that
// every reference compiles, is deterministic, is not degenerate on its inputs, and how fast it runs.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "apps/crl/backend_choice.h"
#include "apps/crl/commands.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/json_bounded.h"
#include "core/read_file.h"
#include "core/text_table.h"
#include "machine/machine_probe.h"
#include "eval/reference_check.h"
#include "rl/prompt.h"
#include "suite/kernelbench_checkout.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

using eval::check_references;
using eval::empty_report;
using eval::ReferenceCheckOptions;
using eval::ReferenceCheckReport;
using eval::ReferenceCheckResult;
using eval::to_json;

struct TasksOptions {
  std::string suite_dir;
  int level = 0;  // 0: every level
  std::string category, id, scale = "small", backend, out;
  std::vector<std::string> check_ids;  // check's --task (repeatable)
  bool json = false;
  bool resume = false;  // with out: keep the results it holds and check only the other tasks
  uint64_t seed = 1;
  double time_budget = 2;
  int cpu_threads = 0;
  size_t jobs = 0;
  std::string cache_dir;
  std::string format = "crl";  // show: the reference as a .crl program, or as KernelBench's module
  std::string kernelbench;     // show --format kernelbench: a KernelBench checkout
};

TaskFilter filter_of(const TasksOptions& o) {
  TaskFilter f;
  if (o.level > 0) f.level = o.level;
  f.category = o.category;
  f.ids = o.check_ids;
  return f;
}

std::string si(double value, const char* unit) {
  if (value >= 1e12) return fmt::format("{:.2f} T{}", value / 1e12, unit);
  if (value >= 1e9) return fmt::format("{:.2f} G{}", value / 1e9, unit);
  if (value >= 1e6) return fmt::format("{:.2f} M{}", value / 1e6, unit);
  if (value >= 1e3) return fmt::format("{:.2f} k{}", value / 1e3, unit);
  return fmt::format("{:.0f} {}", value, unit);
}

std::string time_text(double ms) {
  if (ms >= 1000) return fmt::format("{:.2f} s", ms / 1000);
  if (ms >= 1) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.1f} us", ms * 1000);
}

void run_list(const TasksOptions& o, int& exit_code) {
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  const auto tasks = suite.select(filter_of(o));
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const Task* t : tasks) j.push_back(task_metadata_json(*t));
    std::cout << j.dump(2) << "\n";
  } else {
    TextTable table({"id", "category", "name", "full flops", "full bytes"});
    for (const Task* t : tasks) {
      const bool has_full = t->spec.scales.count("full") > 0;
      table.add_row({t->id, t->spec.category, t->spec.name, has_full ? si(t->spec.flops_at("full"), "FLOP") : "-",
                     has_full ? si(t->spec.bytes_at("full"), "B") : "-"});
    }
    std::cout << table.str() << fmt::format("{} tasks in {}\n", tasks.size(), suite.dir());
  }
  exit_code = kExitOk;
}

// The constructor's arguments at each scale, as Python literals ("(4096, 0.5)"), for a ModelNew
// built as the judge builds it; empty when the spec records none.
nlohmann::json init_args_by_scale(const TaskSpec& spec) {
  nlohmann::json out = nlohmann::json::object();
  if (!spec.init_args) return out;
  for (const auto& scale : spec.scale_names()) out[scale] = python_literal(spec.init_args_at(scale));
  return out;
}

// --format kernelbench: the task's KernelBench module from the checkout (--kernelbench, else
// $CRL_KERNELBENCH_DIR); crl keeps no copy of KernelBench's modules.
std::string kernelbench_module_of(const TasksOptions& o, const Task& task) {
  std::string dir = o.kernelbench;
  if (const char* env = std::getenv("CRL_KERNELBENCH_DIR"); dir.empty() && env != nullptr) dir = env;
  if (dir.empty()) {
    throw InputError(fmt::format("crl tasks show {} --format kernelbench: give a KernelBench checkout (--kernelbench DIR, or "
                                 "$CRL_KERNELBENCH_DIR); crl keeps no copy of KernelBench's modules",
                                 task.id));
  }
  try {
    return read_kernelbench_module(dir, task.id);
  } catch (const IoError& e) {
    throw InputError(fmt::format("--kernelbench: {}", e.what()));
  }
}

void run_show(const TasksOptions& o, int& exit_code) {
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  const Task& task = suite.find(o.id);
  const bool kernelbench = o.format == "kernelbench";
  const std::string program = kernelbench ? kernelbench_module_of(o, task) : task.text;
  if (o.json) {
    nlohmann::json j = task_metadata_json(task);
    j["format"] = o.format;
    j["program"] = program;
    if (kernelbench) j["init_args"] = init_args_by_scale(task.spec);
    std::cout << j.dump(2) << "\n";
    exit_code = kExitOk;
    return;
  }
  const TaskSpec& s = task.spec;
  std::cout << fmt::format("{}  ({}, level {})\n{}\n", task.id, s.category, task.level, s.name);
  if (!s.description.empty()) std::cout << s.description << "\n";
  for (const auto& scale : s.scale_names()) {
    std::cout << fmt::format("scale {}: {}, {} per call\n", scale, si(s.flops_at(scale), "FLOP"),
                             si(s.bytes_at(scale), "B"));
  }
  const Tolerance tol = s.tolerance_for(at::ScalarType::Float);
  std::cout << fmt::format("tolerance: atol {} rtol {}{}\n", tol.atol, tol.rtol,
                           s.tolerance ? "" : " (the float32 default)");
  if (!s.notes.empty()) std::cout << "notes: " << s.notes << "\n";
  if (kernelbench) {
    // The arguments the judge builds ModelNew with follow the scale (KernelBench's module hard-codes the full one).
    const nlohmann::json by_scale = init_args_by_scale(s);
    for (const auto& [scale, args] : by_scale.items()) {
      std::cout << fmt::format("ModelNew's arguments at scale {}: {}\n", scale, args.get<std::string>());
    }
    std::cout << fmt::format("\n--- KernelBench's module for {} (a candidate defines ModelNew alike) ---\n{}", task.id, program);
  } else {
    std::cout << fmt::format("\n--- {} (as the policy sees it) ---\n{}", task.path, rl::reference_for_prompt(task.text));
  }
  exit_code = kExitOk;
}

// --resume: the ok results that `path` (an earlier, perhaps cut-short, `--out` of the same check)
// holds, by task id, after making sure they were measured the same way.
std::map<std::string, nlohmann::json> earlier_results(const std::string& path, const ReferenceCheckReport& now) {
  std::map<std::string, nlohmann::json> by_id;
  if (!std::filesystem::exists(path)) return by_id;
  nlohmann::json j;
  try {
    j = parse_json_bounded(read_input_file(path, "tasks check report"), path);
    // A failed task is checked again: the failure may have been crl's, since fixed.
    for (const auto& r : j.at("results")) {
      if (r.at("status") == "ok") by_id[r.at("id").get<std::string>()] = r;
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("--resume: {} is not a `crl tasks check` report ({}); move it aside", path, e.what()));
  }
  const auto differs = [&](const char* key, const nlohmann::json& value) {
    if (!j.contains(key) || j[key] != value) {
      throw InputError(fmt::format("--resume: {} was checked with {} {}, this check asks for {}; give another --out",
                                   path, key, j.contains(key) ? j[key].dump() : "(none)", value.dump()));
    }
  };
  differs("scale", now.scale);
  differs("backend", now.backend);
  differs("time_budget_seconds", now.time_budget_seconds);
  differs("torch_version", now.torch_version);
  return by_id;
}

// The report as JSON with the results of an earlier --out merged in, in the selection's order.
nlohmann::json merged_report(const ReferenceCheckReport& report, const std::vector<const Task*>& selected,
                             const std::map<std::string, nlohmann::json>& earlier, bool complete) {
  nlohmann::json j = to_json(report);
  std::map<std::string, const ReferenceCheckResult*> checked;
  for (const auto& r : report.results) checked[r.id] = &r;
  nlohmann::json results = nlohmann::json::array();
  size_t failures = 0;
  for (const Task* t : selected) {
    if (const auto it = checked.find(t->id); it != checked.end()) {
      results.push_back(to_json(*it->second));
    } else if (const auto kept = earlier.find(t->id); kept != earlier.end()) {
      results.push_back(kept->second);
    } else {
      continue;
    }
    failures += results.back().at("status") != "ok";
  }
  j["tasks"] = results.size();
  j["failures"] = failures;
  j["results"] = std::move(results);
  // false while the check is still running (or was cut short): `--resume` continues it.
  j["complete"] = complete;
  return j;
}

void run_check(const TasksOptions& o, int& exit_code) {
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
  const auto selected = suite.select(filter_of(o));
  if (selected.empty()) throw InputError("no task matches the given --level, --category and --task");
  if (o.resume && o.out.empty()) throw InputError("--resume needs --out FILE: the report whose results are kept");
  ReferenceCheckOptions options;
  options.scale = o.scale;
  const MachineReport machine = probe_machine();
  options.backend = o.backend.empty() ? (machine.gpus.empty() ? Backend::cpu : Backend::cuda) : choose_backend(o.backend);
  options.seed = o.seed;
  options.time_budget_seconds = o.time_budget;
  options.cpu_threads = o.cpu_threads;
  options.compiler.jobs = o.jobs;
  options.compiler.cache_dir = o.cache_dir;
  ReferenceCheckReport partial = empty_report(options);  // what the check found so far, written to --out after every task
  partial.device_name = options.backend == Backend::cuda && !machine.gpus.empty() ? machine.gpus.front().name : "cpu";
  const auto earlier = o.resume ? earlier_results(o.out, partial) : std::map<std::string, nlohmann::json>{};
  std::vector<const Task*> tasks;
  for (const Task* t : selected) {
    if (!earlier.count(t->id)) tasks.push_back(t);
  }
  if (o.resume) {
    spdlog::info("--resume: {} holds ok results of {} of the {} selected tasks; checking the other {}", o.out,
                 selected.size() - tasks.size(), selected.size(), tasks.size());
  }
  spdlog::info("checking {} reference(s) at scale '{}' on {} (compiling in parallel first)", tasks.size(), o.scale,
               backend_name(options.backend));
  const auto start = std::chrono::steady_clock::now();
  ReferenceCheckReport report = check_references(tasks, options, [&](const ReferenceCheckResult& r) {
    partial.results.push_back(r);
    const size_t done = partial.results.size();
    const double seconds = seconds_since(start);
    spdlog::info("[{}/{}] {} {} {} ({:.1f} s a task, about {:.0f} s left)", done, tasks.size(), r.id, r.status,
                 r.ok() ? time_text(r.median_ms) : "", seconds / done, seconds / done * (tasks.size() - done));
    // A check cut short (a time limit, a lost node) keeps every result so far: --resume continues it.
    if (!o.out.empty()) {
      partial.seconds = seconds;
      write_file_atomically(o.out, merged_report(partial, selected, earlier, false).dump(2) + "\n");
    }
  });
  report.device_name = partial.device_name;
  const nlohmann::json j = merged_report(report, selected, earlier, true);
  if (!o.out.empty()) write_file_atomically(o.out, j.dump(2) + "\n");
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    TextTable table({"id", "category", "status", "median", "vs itself", "GFLOP/s", "GB/s", "compile"});
    for (const auto& r : report.results) {
      const bool timed = r.median_ms > 0;
      table.add_row({r.id, r.category, r.status + (r.degenerate_declared ? " (declared degenerate)" : ""),
                     timed ? time_text(r.median_ms) : "-",
                     timed ? fmt::format("{:.3f} ({:.3f}..{:.3f})", r.self_speedup, r.self_speedup_ci_low, r.self_speedup_ci_high) : "-",
                     timed ? fmt::format("{:.1f}", r.gflops_per_s) : "-",
                     timed ? fmt::format("{:.1f}", r.gbytes_per_s) : "-",
                     r.cache_hit ? "cached" : fmt::format("{:.1f} s", r.compile_seconds)});
    }
    std::cout << table.str();
    for (const auto& r : report.results) {
      if (!r.ok()) std::cout << fmt::format("\n{} {}:\n{}\n", r.id, r.status, r.message);
    }
    std::cout << fmt::format("\n{} of {} tasks ok at scale '{}' on {} ({}) in {:.1f} s\n",
                             report.results.size() - report.failures(), report.results.size(), report.scale,
                             report.backend, report.device_name, report.seconds);
    if (tasks.size() < selected.size()) {
      std::cout << fmt::format("with the {} results kept from {}: {} of {} ok\n", selected.size() - tasks.size(), o.out,
                               j["tasks"].get<size_t>() - j["failures"].get<size_t>(), j["tasks"].get<size_t>());
    }
  }
  exit_code = j["failures"].get<size_t>() == 0 ? kExitOk : kExitFailure;
}

}  // namespace

void add_tasks_command(CLI::App& app, int& exit_code) {
  auto* tasks = app.add_subcommand("tasks", "The task suite: list tasks, show one, check the references");
  tasks->require_subcommand(1);
  static TasksOptions o;
  const auto add_suite_dir = [](CLI::App* cmd) {
    cmd->add_option("--suite,--suite-dir", o.suite_dir, "Suite folder (default: $CRL_SUITE_DIR, else the source tree's jobs/suite)");
  };

  auto* list = tasks->add_subcommand("list", "List the tasks (id, category, name, full-scale cost)");
  add_suite_dir(list);
  list->add_option("--level", o.level, "Only this level")->check(CLI::PositiveNumber);
  list->add_option("--category", o.category, "Only this category");
  list->add_flag("--json", o.json, "Print every task's metadata as a JSON array");
  list->callback([&exit_code] { run_list(o, exit_code); });

  auto* show = tasks->add_subcommand("show", "Show one task: metadata and its reference program");
  add_suite_dir(show);
  show->add_option("id", o.id, "Task id, e.g. level1/019_relu")->required();
  show->add_flag("--json", o.json, "Print metadata and program text as JSON");
  show->add_option("--format", o.format,
                   "crl: the reference program (default); kernelbench: the task's KernelBench module, from --kernelbench")
      ->check(CLI::IsMember({"crl", "kernelbench"}));
  show->add_option("--kernelbench", o.kernelbench, "A KernelBench checkout, for --format kernelbench (default: $CRL_KERNELBENCH_DIR)");
  show->callback([&exit_code] { run_show(o, exit_code); });

  auto* check = tasks->add_subcommand(
      "check", "Compile and run every selected reference: deterministic, not degenerate, timed; exit 1 if any fails");
  add_suite_dir(check);
  check->add_option("--scale", o.scale, "Scale to run at")->capture_default_str();
  check->add_option("--level", o.level, "Only this level")->check(CLI::PositiveNumber);
  check->add_option("--category", o.category, "Only this category");
  check->add_option("--task", o.check_ids, "Only these task ids (repeat --task for several)");
  check->add_option("--backend", o.backend, "cpu or cuda (default: cuda when a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  check->add_option("--seed", o.seed, "Seed of runs 1 and 2 (run 3 uses a seed far from it)")->capture_default_str();
  check->add_option("--time-budget", o.time_budget,
                    "Seconds of timing per task by the evaluator's timer (the reference judged against itself); 0: not timed")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  check->add_option("--cpu-threads", o.cpu_threads, "Intra-op threads of the evaluator's CPU workers (default: LibTorch's)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--jobs", o.jobs, "Parallel compiles (default: hardware threads)");
  check->add_option("--cache-dir", o.cache_dir, "Compile cache (default: $CRL_CACHE_DIR, else ~/.cache/crl/compile)");
  check->add_flag("--json", o.json, "Print the report as JSON");
  check->add_option("--out", o.out,
                    "Also write the JSON report to this file (e.g. results/baselines/...), rewritten after every task");
  check->add_flag("--resume", o.resume,
                  "With --out: keep the ok results the file holds (a check cut short) and check only the other tasks");
  check->callback([&exit_code] { run_check(o, exit_code); });
}

}  // namespace crl::cli
