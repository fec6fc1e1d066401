// Tests of `crl report` (apps/crl/cmd_report.cpp, tools/analysis/crl_report.py): statistics checked
// against numbers worked out by hand from files the test writes with crl's own ResultsWriter, run
// tables in the layout `crl run` writes (a writer still open), damaged files, exit codes, --json, and
// the page opened in headless Chromium (skipped, saying why, without a browser or the analysis venv).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "eval/verdict_table.h"
#include "results/results_writer.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
using results::CellValue;
using results::ColumnType;

fs::path venv_python() {
  const char* crl_home = std::getenv("CRL_HOME");
  const char* home = std::getenv("HOME");
  return (crl_home && *crl_home ? fs::path(crl_home) : fs::path(home ? home : "/") / ".local/share/crl") /
         "venv/bin/python3";
}

// Why the report cannot run here, or "" when it can (found without importing: pandas takes seconds).
std::string missing_analysis_python() {
  static const std::string why = [] {
    const auto python = venv_python();
    if (!fs::exists(python)) return "no crl venv python at " + python.string() + " (tools/setup.sh makes it)";
    const auto probe = run_command({python.string(), "-c",
                                    "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None "
                                    "for m in ('h5py', 'pandas', 'matplotlib')))"});
    return probe.ok() ? std::string() : python.string() + " lacks h5py, pandas or matplotlib (tools/setup.sh installs them)";
  }();
  return why;
}

#define SKIP_WITHOUT_ANALYSIS_PYTHON()                          \
  do {                                                          \
    if (const auto why = missing_analysis_python(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / (std::string("crl_report_") + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

CommandResult crl_report(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {CRL_EXE, "report"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, {.timeout = std::chrono::minutes(3), .max_output = 1 << 24, .env = std::move(env)});
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// stdout and stderr arrive merged: the JSON document is the part from the first line that is "{".
nlohmann::json json_in(const std::string& output) {
  const auto begin = output.find("{\n");
  EXPECT_NE(begin, std::string::npos) << output;
  return nlohmann::json::parse(output.substr(begin == std::string::npos ? 0 : begin));
}

eval::Verdict verdict(const std::string& task, eval::VerdictStatus status, double speedup, double lo = 0,
                      double hi = 0, const std::string& hack = "") {
  eval::Verdict v;
  v.task_id = task;
  v.candidate = task.substr(task.find('/') + 1) + ".crl";
  v.backend = "cuda";
  v.scale = "full";
  v.status = status;
  v.hack_kind = hack;
  v.speedup = speedup;
  v.speedup_ci_low = lo;
  v.speedup_ci_high = hi;
  v.candidate_time = {100.0, 2.0, 50};
  v.reference_time = {100.0 * speedup, 2.0, 50};
  return v;
}

// Level 1: tasks a..j, 7 attempted (f has only crl's own internal error, which does not count);
// best correct speedups a 3.0 (of 2.0 and 3.0), b 0.5, i 1.005, j 1.6; c mismatch, d compile error,
// e a hack that claimed 50x. Level 2: g 1.2, h 4.0 (and a runtime error).
void write_golden_file(const std::string& file) {
  using S = eval::VerdictStatus;
  results::ResultsWriter writer(file);
  std::vector<eval::Verdict> v = {
      verdict("level1/001_a", S::kOk, 2.0, 1.9, 2.1),  verdict("level1/001_a", S::kOk, 3.0, 2.8, 3.2),
      verdict("level1/002_b", S::kOk, 0.5, 0.45, 0.55), verdict("level1/003_c", S::kMismatch, 0),
      verdict("level1/004_d", S::kCompileError, 0),     verdict("level1/005_e", S::kHack, 50.0, 0, 0, "aliasing"),
      verdict("level1/006_f", S::kInternalError, 0),    verdict("level1/009_i", S::kOk, 1.005, 0.99, 1.02),
      verdict("level1/010_j", S::kOk, 1.6, 1.5, 1.7),   verdict("level2/001_g", S::kOk, 1.2, 1.1, 1.3),
      verdict("level2/002_h", S::kOk, 4.0, 3.9, 4.1),   verdict("level2/002_h", S::kRuntimeError, 0),
  };
  v[5].steps = {{"compile", true, "", 1.0}, {"guard: aliasing", false, "output 0 aliases input x", 0.1}};
  v[5].message = "hack: output aliases an input";
  v[10].steps = {{"timing", true, "", 1.0},
                 {"guard: re-measure", true, "speedup 4.000 re-measured by wall clock in a fresh worker: 3.950", 0.5}};
  eval::append_verdicts(writer, v);
  writer.close();
}

TEST_F(ReportTest, GoldenNumbersFromVerdictsMatchHandComputation) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  const auto file = path("golden.h5");
  write_golden_file(file);
  const auto r = crl_report({file, "--out", path("out"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = json_in(r.output);
  EXPECT_EQ(summary, nlohmann::json::parse(read_file(path("out/summary.json"))));
  const auto& levels = summary["inputs"][0]["levels"]["eager"];

  const auto& l1 = levels["level1"];
  EXPECT_EQ(l1["tasks"], 7);
  EXPECT_EQ(l1["tasks_correct"], 4);
  EXPECT_EQ(l1["tasks_faster"], 2);  // 1.6 and 3.0; 1.005 is not above 1.01
  EXPECT_NEAR(l1["mean"].get<double>(), (3.0 + 0.5 + 1.005 + 1.6) / 4, 1e-12);
  EXPECT_DOUBLE_EQ(l1["max"].get<double>(), 3.0);
  // Sorted 0.5, 1.005, 1.6, 3.0; linear interpolation at q * (n - 1).
  EXPECT_NEAR(l1["q25"].get<double>(), 0.5 + 0.75 * (1.005 - 0.5), 1e-12);
  EXPECT_NEAR(l1["median"].get<double>(), (1.005 + 1.6) / 2, 1e-12);
  EXPECT_NEAR(l1["q75"].get<double>(), 1.6 + 0.25 * (3.0 - 1.6), 1e-12);
  EXPECT_NEAR(l1["geomean"].get<double>(), std::pow(3.0 * 0.5 * 1.005 * 1.6, 0.25), 1e-12);
  EXPECT_NEAR(l1["fast_p"]["0"].get<double>(), 4.0 / 100, 1e-12);  // over the suite's 100 level-1 tasks
  EXPECT_NEAR(l1["fast_p"]["0.5"].get<double>(), 3.0 / 100, 1e-12);  // strictly faster: 0.5 itself is not
  EXPECT_NEAR(l1["fast_p"]["0.8"].get<double>(), 3.0 / 100, 1e-12);
  EXPECT_NEAR(l1["fast_p"]["1"].get<double>(), 3.0 / 100, 1e-12);
  EXPECT_NEAR(l1["fast_p"]["1.5"].get<double>(), 2.0 / 100, 1e-12);
  EXPECT_NEAR(l1["fast_p"]["2"].get<double>(), 1.0 / 100, 1e-12);
  EXPECT_EQ(l1["fast_p_denominator"], "the level's 100 tasks");
  // pass@k per task is 1 - C(n-c, k) / C(n, k): level 1's tasks have n/c 2/2, 1/1, 1/0, 1/0, 1/0,
  // 1/1, 1/1, so pass@1 = 4/7; no task has 5 samples, so pass@5 is null over 0 tasks.
  EXPECT_NEAR(l1["pass_at_k"]["1"].get<double>(), 4.0 / 7, 1e-12);
  EXPECT_EQ(l1["pass_at_k_tasks"]["1"], 7);
  EXPECT_TRUE(l1["pass_at_k"]["5"].is_null());
  EXPECT_EQ(l1["pass_at_k_tasks"]["5"], 0);
  EXPECT_EQ(l1["attempts"], 8);  // the internal error is left out
  EXPECT_NEAR(l1["compile_rate"].get<double>(), 7.0 / 8, 1e-12);
  EXPECT_NEAR(l1["correct_rate"].get<double>(), 5.0 / 8, 1e-12);
  EXPECT_NEAR(l1["hack_rate"].get<double>(), 1.0 / 8, 1e-12);

  const auto& l2 = levels["level2"];
  EXPECT_EQ(l2["tasks"], 2);
  EXPECT_NEAR(l2["mean"].get<double>(), 2.6, 1e-12);
  EXPECT_NEAR(l2["q25"].get<double>(), 1.2 + 0.25 * 2.8, 1e-12);
  EXPECT_NEAR(l2["geomean"].get<double>(), std::sqrt(1.2 * 4.0), 1e-12);
  EXPECT_NEAR(l2["fast_p"]["2"].get<double>(), 1.0 / 100, 1e-12);
  EXPECT_NEAR(l2["correct_rate"].get<double>(), 2.0 / 3, 1e-12);
  EXPECT_NEAR(l2["pass_at_k"]["1"].get<double>(), (1.0 + 0.5) / 2, 1e-12);  // g 1/1, h 2 samples, 1 correct


  const auto& all = levels["all"];
  EXPECT_EQ(all["tasks"], 9);
  EXPECT_NEAR(all["mean"].get<double>(), (3.0 + 0.5 + 1.005 + 1.6 + 1.2 + 4.0) / 6, 1e-12);
  EXPECT_NEAR(all["fast_p"]["1"].get<double>(), 5.0 / 200, 1e-12);
  EXPECT_NEAR(all["geomean"].get<double>(), std::pow(3.0 * 0.5 * 1.005 * 1.6 * 1.2 * 4.0, 1.0 / 6), 1e-12);

  // The hack report: the hack, with the guard that fired and what it saw, and the re-measured verdict.
  ASSERT_EQ(summary["hacks"].size(), 2u) << summary["hacks"].dump(2);
  EXPECT_EQ(summary["hacks"][0]["task"], "level1/005_e");
  EXPECT_EQ(summary["hacks"][0]["guard"], "guard: aliasing");
  EXPECT_EQ(summary["hacks"][0]["what it saw"], "output 0 aliases input x");
  EXPECT_EQ(summary["hacks"][1]["task"], "level2/002_h");
  EXPECT_EQ(summary["hacks"][1]["guard"], "guard: re-measure");
  EXPECT_EQ(summary["hacks"][1]["what it saw"], "speedup 4.000 re-measured by wall clock in a fresh worker: 3.950");

  // tasks.csv: one row per attempted task, the best with its interval.
  const auto csv = read_file(path("out/tasks.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 9) << csv;
  EXPECT_NE(csv.find("level1/001_a,1,2,2,2,3.0,2.8,3.2,001_a.crl"), std::string::npos) << csv;
  for (const char* file_name : {"index.html", "summary.md"}) {
    EXPECT_TRUE(fs::exists(path(std::string("out/") + file_name))) << file_name;
  }
  // Roofline: level1/001..010 of the real suite are named here only as test tasks, so only tasks the
  // suite knows get figures; every plot the summary lists was written.
  for (const auto& plot : summary["page"]["plots"]) {
    EXPECT_TRUE(fs::exists(path("out/plots/" + plot.get<std::string>() + ".png"))) << plot;
  }
}

// The run tables exactly as `crl run` writes them (docs/results-format.md; the names are the job's).
const results::TableSchema& steps_schema() {
  static const results::TableSchema s = {
      {"step", ColumnType::int64}, {"stage", ColumnType::string}, {"policy_version", ColumnType::int64},
      {"loss", ColumnType::float64}, {"grad_norm", ColumnType::float64}, {"lr", ColumnType::float64},
      {"skipped", ColumnType::boolean}, {"reward_mean", ColumnType::float64}, {"reward_median", ColumnType::float64},
      {"reward_max", ColumnType::float64}, {"n_ok", ColumnType::int64}, {"n_compile_error", ColumnType::int64},
      {"n_runtime_error", ColumnType::int64}, {"n_timeout", ColumnType::int64}, {"n_crash", ColumnType::int64},
      {"n_mismatch", ColumnType::int64}, {"n_hack", ColumnType::int64}, {"n_format_error", ColumnType::int64},
      {"n_internal_error", ColumnType::int64}, {"tokens_generated", ColumnType::int64},
      {"tokens_trained", ColumnType::int64}, {"seconds_generate", ColumnType::float64},
      {"seconds_evaluate", ColumnType::float64}, {"seconds_train", ColumnType::float64},
      {"evaluator_busy_fraction", ColumnType::float64}, {"trainer_wait_seconds", ColumnType::float64},
      {"restart", ColumnType::int64}};
  return s;
}

const results::TableSchema& rollouts_schema() {
  static const results::TableSchema s = {
      {"rollout_id", ColumnType::int64}, {"step", ColumnType::int64}, {"stage", ColumnType::string},
      {"task", ColumnType::string}, {"group", ColumnType::int64}, {"sample", ColumnType::int64},
      {"status", ColumnType::string}, {"speedup", ColumnType::float64}, {"speedup_ci_low", ColumnType::float64},
      {"speedup_ci_high", ColumnType::float64}, {"reward", ColumnType::float64},
      {"normalized_reward", ColumnType::float64}, {"advantage", ColumnType::float64},
      {"completion_tokens", ColumnType::int64}, {"evaluator_rank", ColumnType::int64},
      {"exemplar_ids", ColumnType::string}, {"policy_version", ColumnType::int64}, {"restart", ColumnType::int64},
      {"superseded", ColumnType::boolean}};
  return s;
}

void add_step(results::ResultsWriter& w, int64_t step, double reward_mean, int64_t n_ok, int64_t n_hack) {
  results::RowBatch b(steps_schema());
  b.add_row({CellValue{step}, "rl", CellValue{step}, 0.5, 1.0, 1e-6, false, reward_mean, reward_mean, 2 * reward_mean,
             CellValue{n_ok}, CellValue{int64_t{1}}, CellValue{int64_t{0}}, CellValue{int64_t{0}}, CellValue{int64_t{0}},
             CellValue{int64_t{1}}, CellValue{n_hack}, CellValue{int64_t{0}}, CellValue{int64_t{0}},
             CellValue{int64_t{4096}}, CellValue{int64_t{4000}}, 10.0, 20.0, 5.0, 0.8, 1.5, CellValue{int64_t{0}}});
  w.append("steps", b);
}

void add_rollout(results::ResultsWriter& w, int64_t id, int64_t step, const std::string& task, const std::string& status,
                 double speedup, const std::string& exemplars, bool superseded = false) {
  results::RowBatch b(rollouts_schema());
  b.add_row({CellValue{id}, CellValue{step}, "rl", task, CellValue{int64_t{0}}, CellValue{id % 4}, status, speedup,
             speedup * 0.9, speedup * 1.1, speedup, 0.0, 0.0, CellValue{int64_t{300}}, CellValue{int64_t{1}},
             exemplars, CellValue{step}, CellValue{int64_t{0}}, superseded});
  w.append("rollouts", b);
  w.put_text("programs", id, "// program of rollout " + std::to_string(id) + "\nat::Tensor forward(const at::Tensor& x) "
                             "{ return fused_relu_" + std::to_string(id) + "(x); }\n");
  w.put_text("logs", id, status == "ok" ? "" : "log of rollout " + std::to_string(id) + ": " + status);
}

// Where no suite is found, fast_p falls back to the attempted tasks and says so beside the table.
TEST_F(ReportTest, FastPIsOverTheAttemptedTasksWhenNoSuiteIsKnown) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  const auto file = path("golden.h5");
  write_golden_file(file);
  const auto r = crl_report({file, "--out", path("out"), "--json"}, {{"CRL_SUITE_DIR", path("no-suite")}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = json_in(r.output);
  const auto& levels = summary["inputs"][0]["levels"]["eager"];
  EXPECT_NEAR(levels["level1"]["fast_p"]["1"].get<double>(), 3.0 / 7, 1e-12);
  EXPECT_NEAR(levels["level1"]["fast_p"]["0"].get<double>(), 4.0 / 7, 1e-12);
  EXPECT_EQ(levels["level1"]["fast_p_denominator"], "the 7 attempted tasks");
  EXPECT_NEAR(levels["level2"]["fast_p"]["2"].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(levels["all"]["fast_p"]["1"].get<double>(), 5.0 / 9, 1e-12);
}

// KernelBench-format programs (a verdict's format column) are counted apart from .crl ones of the
// same tasks: the levels table gains "eager+kernelbench" beside "eager", the page a format column.
TEST_F(ReportTest, KernelBenchFormatVerdictsAreCountedApartFromCrlOnes) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  using S = eval::VerdictStatus;
  const auto file = path("formats.h5");
  {
    results::ResultsWriter writer(file);
    std::vector<eval::Verdict> v = {verdict("level1/001_a", S::kOk, 2.0, 1.9, 2.1), verdict("level1/001_a", S::kOk, 3.0, 2.9, 3.1),
                                    verdict("level1/002_b", S::kMismatch, 0)};
    v[1].format = v[2].format = "kernelbench";
    eval::append_verdicts(writer, v);
    writer.close();
  }
  const auto r = crl_report({file, "--out", path("out"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto levels = json_in(r.output)["inputs"][0]["levels"];
  ASSERT_TRUE(levels.contains("eager") && levels.contains("eager+kernelbench")) << levels.dump();
  EXPECT_EQ(levels["eager"]["level1"]["tasks"], 1);
  EXPECT_DOUBLE_EQ(levels["eager"]["level1"]["max"].get<double>(), 2.0) << "the ModelNew's 3.0 is not the .crl program's";
  EXPECT_EQ(levels["eager+kernelbench"]["level1"]["tasks"], 2);
  EXPECT_EQ(levels["eager+kernelbench"]["level1"]["tasks_correct"], 1);
  EXPECT_DOUBLE_EQ(levels["eager+kernelbench"]["level1"]["max"].get<double>(), 3.0);
  const std::string md = read_file(path("out/summary.md"));
  EXPECT_NE(md.find("| format |"), std::string::npos) << md.substr(0, 2000);
  EXPECT_NE(md.find("| kernelbench |"), std::string::npos) << md.substr(0, 2000);
}

TEST_F(ReportTest, RunTablesWhileTheJobWritesGiveCurvesBestProgramsAndLineage) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  const auto file = path("run.h5");
  results::ResultsWriter writer(file, {.chunk_rows = 2});
  writer.declare_table("steps", steps_schema());
  writer.declare_table("rollouts", rollouts_schema());
  writer.set_meta("git_commit", "0123456789abcdef");
  writer.set_meta_json("gpu_names", nlohmann::json::array({"NVIDIA H200"}));
  writer.set_meta_json("job_config", {{"group_size", 4}});
  add_step(writer, 0, 0.5, 2, 0);
  add_rollout(writer, 10, 0, "level1/019_relu", "ok", 1.10, "");
  add_rollout(writer, 11, 0, "level1/019_relu", "mismatch", 0, "");
  add_step(writer, 1, 0.9, 2, 1);
  add_rollout(writer, 12, 1, "level1/019_relu", "ok", 1.50, "10");
  add_rollout(writer, 13, 1, "level1/019_relu", "hack:aliasing", 40.0, "10,12");
  add_rollout(writer, 14, 1, "level1/019_relu", "ok", 9.00, "10", /*superseded=*/true);  // re-measured away
  add_step(writer, 2, 1.2, 3, 0);
  add_rollout(writer, 15, 2, "level1/019_relu", "ok", 2.25, "12,10");
  add_rollout(writer, 16, 2, "level2/001_conv2d_relu_biasadd", "compile_error", 0, "");
  writer.flush();
  // A step appended after the last flush: a reader sees the file as of that flush.
  add_step(writer, 3, 7.0, 1, 0);

  const auto r = crl_report({file, "--out", path("out"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = json_in(r.output);
  const auto& input = summary["inputs"][0];
  EXPECT_EQ(input["steps"]["count"], 3) << input.dump(2);
  EXPECT_EQ(input["steps"]["last_step"], 2);
  EXPECT_DOUBLE_EQ(input["steps"]["reward_mean_last"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(input["steps"]["hack_share_last"].get<double>(), 0.0);
  EXPECT_EQ(input["steps"]["tokens_generated"], 3 * 4096);
  EXPECT_EQ(input["gpu"], "NVIDIA H200");
  // Best of 019_relu: 2.25 (rollout 15); the superseded 9.0 and the hack's 40 do not count.
  const auto& l1 = input["levels"]["eager"]["level1"];
  EXPECT_DOUBLE_EQ(l1["max"].get<double>(), 2.25);
  EXPECT_EQ(l1["attempts"], 5);
  EXPECT_EQ(input["levels"]["eager"]["level2"]["tasks_correct"], 0);
  const auto& page = summary["page"];
  for (const char* plot : {"run_reward", "run_status", "run_hack_kinds", "run_tokens", "run_time", "run_evaluators",
                           "run_best_over_steps"}) {
    EXPECT_NE(std::find(page["plots"].begin(), page["plots"].end(), plot), page["plots"].end()) << plot << page.dump();
  }
  EXPECT_NE(std::find(page["tables"].begin(), page["tables"].end(), "run_lineage"), page["tables"].end());
  const auto html = read_file(path("out/index.html"));
  EXPECT_NE(html.find("12 (step 1, 1.50x); 10 (step 0, 1.10x)"), std::string::npos) << "lineage of rollout 15";
  EXPECT_NE(html.find("fused_relu_15"), std::string::npos) << "the best program's diff against the reference";
  EXPECT_NE(html.find("return at::relu(x)"), std::string::npos) << "the reference's side of the diff";
  ASSERT_EQ(summary["hacks"].size(), 1u);
  EXPECT_EQ(summary["hacks"][0]["what it saw"], "log of rollout 13: hack:aliasing");

  // The notebook module (tools/analysis/crl_results.py), as its docstring shows it: the rollout a
  // resume re-did (14) is left out unless asked for, as the report leaves it out; the file's row
  // numbers stay the index.
  const auto notebook = run_command(
      {venv_python().string(), "-c",
       "import sys; sys.path.insert(0, sys.argv[2]); import crl_results\n"
       "run = crl_results.load(sys.argv[1], texts=True)\n"
       "print(len(run.steps), len(run.rollouts), len(run.verdicts), list(run.verdicts.columns)[:2], "
       "run.job_config['group_size'], run.meta['git_commit'], run.rollouts.superseded.sum(), "
       "run.texts['logs'][13], run.rollouts.rollout_id.tolist(), run.rollouts.index.tolist())\n"
       "every = crl_results.load(sys.argv[1], superseded=True)\n"
       "print(len(every.rollouts), every.rollouts.superseded.sum(), every.rollouts.rollout_id.tolist())\n"
       "with crl_results.open_results(sys.argv[1]) as f:\n"
       "    print(f.tables(), f.texts('programs', ids=[15, 99]).index.tolist())",
       file, std::string(CRL_SOURCE_DIR) + "/tools/analysis"});
  ASSERT_TRUE(notebook.ok()) << notebook.output;
  EXPECT_EQ(notebook.output, "3 6 0 ['row', 'task'] 4 0123456789abcdef 0 log of rollout 13: hack:aliasing "
                             "[10, 11, 12, 13, 15, 16] [0, 1, 2, 3, 5, 6]\n"
                             "7 1 [10, 11, 12, 13, 14, 15, 16]\n"
                             "['rollouts', 'steps'] [15]\n");
  writer.close();
}

TEST_F(ReportTest, SideBySideAndThePageOpensInHeadlessChromium) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  const std::string browser = find_on_path("chromium");
  if (browser.empty()) GTEST_SKIP() << "no chromium on PATH: `apt-get install chromium` (tools/setup.sh does it on Debian)";
  write_golden_file(path("gpu_a.h5"));
  write_golden_file(path("gpu_b.h5"));
  const auto baselines = std::string(CRL_SOURCE_DIR) + "/results/baselines/";
  const auto r = crl_report({path("gpu_a.h5"), path("gpu_b.h5"), baselines + "level1_full_h200.json",
                             baselines + "level1_examples_speedups_h200.json", "--out", path("out")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = nlohmann::json::parse(read_file(path("out/summary.json")));
  const auto& tables = summary["page"]["tables"];
  for (const char* t : {"inputs", "cuda_l1", "fast_p", "rates", "side_by_side", "hacks", "reference_levels"}) {
    EXPECT_NE(std::find(tables.begin(), tables.end(), t), tables.end()) << t << " not in " << tables.dump();
  }
  const auto artifacts = fs::path(CRL_BINARY_DIR) / "test-artifacts" / "report";
  fs::create_directories(artifacts);
  const auto shot = (artifacts / "report_page.png").string();
  const auto check = run_command({venv_python().string(), std::string(CRL_SOURCE_DIR) + "/tests/report/check_page.py",
                                  path("out/index.html"), "--screenshot", shot, "--browser", browser, "--expect",
                                  path("out/summary.json")},
                                 {.timeout = std::chrono::minutes(2), .max_output = 1 << 22});
  if (check.exit_code == 2) GTEST_SKIP() << "chromium did not start here: " << check.output;
  ASSERT_EQ(check.exit_code, 0) << check.output;
  const auto seen = json_in(check.output);
  EXPECT_EQ(seen["tables"], tables);
  EXPECT_EQ(seen["plots"].size(), summary["page"]["plots"].size());
  EXPECT_TRUE(seen["console_errors"].empty()) << seen.dump(2);
  EXPECT_TRUE(seen["requests"].empty()) << seen.dump(2);
  EXPECT_GT(fs::file_size(shot), 10000u) << "the screenshot, kept as a test artifact at " << shot;
  std::cout << "screenshot: " << shot << "\n";
}

TEST_F(ReportTest, DamagedFilesAreBadInputNotHugeAllocations) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  const auto damage = [&](const std::string& file, const std::string& python_statement) {
    write_golden_file(file);
    const auto r = run_command({venv_python().string(), "-c",
                                "import h5py, sys\nf = h5py.File(sys.argv[1], 'r+')\n" + python_statement + "\nf.close()",
                                file});
    ASSERT_TRUE(r.ok()) << r.output;
  };
  // 2^40 rows claimed by one column: the file holds a few KiB.
  damage(path("huge.h5"), "f['verdicts/speedup'].resize((1 << 40,))");
  auto r = crl_report({path("huge.h5"), "--out", path("out")});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("verdicts/speedup claims 1099511627776 rows"), std::string::npos) << r.output;

  damage(path("names.h5"), "cols = list(f['verdicts'].attrs['crl_columns']); cols[1] = 'task; rm -rf'\n"
                           "f['verdicts'].attrs['crl_columns'] = cols");
  r = crl_report({path("names.h5"), "--out", path("out")});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("breaks the naming rule"), std::string::npos) << r.output;

  std::ofstream(path("not.h5")) << "not a results file";
  r = crl_report({path("not.h5"), "--out", path("out")});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("not.h5"), std::string::npos) << r.output;

  r = crl_report({path("absent.h5"), "--out", path("out")});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("no such file"), std::string::npos) << r.output;
}

TEST_F(ReportTest, UsageErrorsAndAMissingAnalysisPythonHaveTheirExitCodes) {
  EXPECT_EQ(crl_report({}).exit_code, 2);
  EXPECT_EQ(crl_report({"x.h5"}).exit_code, 2) << "--out is required";
  EXPECT_EQ(crl_report({"x.h5", "--out", path("o"), "--peak-gbps", "100"}).exit_code, 2) << "peaks go together";
  write_golden_file(path("golden.h5"));
  const auto r = crl_report({path("golden.h5"), "--out", path("o")}, {{"CRL_HOME", path("no-venv")}});
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("tools/setup.sh"), std::string::npos) << r.output;
}

TEST_F(ReportTest, AFileWithoutTablesGivesAnEmptyReport) {
  SKIP_WITHOUT_ANALYSIS_PYTHON();
  { results::ResultsWriter(path("empty.h5")).close(); }
  const auto r = crl_report({path("empty.h5"), "--out", path("out"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = json_in(r.output);
  EXPECT_EQ(summary["inputs"][0]["attempts"], 0);
  EXPECT_TRUE(summary["hacks"].empty());
}

}  // namespace
}  // namespace crl
