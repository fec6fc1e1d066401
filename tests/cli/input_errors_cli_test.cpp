// Bad input through the commands as a user types them (issue 41): paths of the wrong kind, results
// files of the wrong schema or damaged, a locked results file, unbounded YAML aliases and JSON
// nesting, suite folders (symlink loops, level numbers out of range), a planted completion for a
// task the job lacks. Each must be exit 3 (never 4, 139 or a hang) with a message that names the
// file and what is wrong. The one exception kept here beside them: a candidate with a spec section
// is not bad input but that candidate's format_error verdict (issue 43).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "results/results_writer.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
using results::ColumnType;
using results::RowBatch;
using results::TableSchema;

const fs::path kEvalSuite = fs::path(CRL_TEST_DATA_DIR) / "eval" / "suite";
const fs::path kRelu = fs::path(CRL_TEST_DATA_DIR) / "eval" / "relu" / "same_as_reference.crl";

class InputErrorsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("crl_input_errors_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  fs::path file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  // A job file good enough to reach the run's input checks (its model is `model`).
  fs::path job(const std::string& extra = "", const std::string& model = "model") const {
    file("d.jsonl", "{\"task\": \"level1/019_relu\", \"program\": \"// crl:host\\nint x;\"}\n");
    return file("job.yaml", fmt::format("name: x\nmodel: {}\n{}stages:\n  - {{kind: sft, data: d.jsonl}}\n", model, extra));
  }

  // A whole model folder (config.json, weights, tokenizer), which crl run checks before it reads
  // the job's other inputs: a tiny one from `crl init-model`.
  fs::path whole_model() const {
    const fs::path model = dir_ / "whole-model";
    const auto r = run_command({CRL_EXE, "init-model", "--out", model.string(), "--corpus",
                                (fs::path(CRL_TEST_DATA_DIR) / "policy" / "tokenizers" / "train_corpus.txt").string(), "--vocab-size",
                                "300", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return model;
  }

  // A results file whose /rollouts has `schema` (one row of zeros), written by crl's own writer.
  fs::path results_file(const std::string& name, const TableSchema& schema) const {
    const fs::path path = dir_ / name;
    results::ResultsWriter writer(path.string());
    writer.declare_table("rollouts", schema);
    RowBatch batch(schema);
    std::vector<results::CellValue> row;
    for (const auto& c : schema) {
      switch (c.type) {
        case ColumnType::int64: row.emplace_back(std::int64_t{0}); break;
        case ColumnType::float64: row.emplace_back(1.5); break;
        case ColumnType::boolean: row.emplace_back(false); break;
        case ColumnType::string: row.emplace_back(c.name == "status" ? std::string("ok") : std::string("level1/019_relu")); break;
      }
    }
    batch.add_row(row);
    writer.append("rollouts", batch);
    writer.put_text("programs", 0, "// crl:host\nint x;");
    writer.set_meta("git_commit", "feedbeef");
    writer.close();
    return path;
  }

  // An HDF5 change to a closed results file, as another program (or damage) would make it.
  static void edit_hdf5(const fs::path& path, const std::function<void(hid_t)>& edit) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    edit(f);
    H5Fclose(f);
  }

  fs::path dir_;
};

const TableSchema kRollouts = {{"rollout_id", ColumnType::int64},
                               {"task", ColumnType::string},
                               {"status", ColumnType::string},
                               {"speedup", ColumnType::float64},
                               {"superseded", ColumnType::boolean}};

void expect_bad_input(const CommandResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 3) << r.output;
  for (const auto& part : parts) EXPECT_NE(r.output.find(part), std::string::npos) << "no '" << part << "' in: " << r.output;
}

CommandResult crl(std::vector<std::string> args) {
  args.insert(args.begin(), CRL_EXE);
  return run_command(args, {.timeout = std::chrono::seconds(60)});
}

// ---- paths of the wrong kind ----------------------------------------------------------------------

TEST_F(InputErrorsCli, RunWithAModelPathThatIsAFile) {
  file("model", "not a folder");
  expect_bad_input(crl({"run", job().string(), "--run-dir", (dir_ / "run").string()}), {"model", "is not a folder"});
}

TEST_F(InputErrorsCli, RunWithAMissingModel) {
  expect_bad_input(crl({"run", job("", "nowhere").string(), "--run-dir", (dir_ / "run").string()}), {"nowhere"});
}

TEST_F(InputErrorsCli, RunWithAModelWhoseConfigIsAFolder) {
  fs::create_directories(dir_ / "model" / "config.json");
  expect_bad_input(crl({"run", job().string(), "--run-dir", (dir_ / "run").string()}), {"config.json", "not a regular file"});
}

TEST_F(InputErrorsCli, GenerateWithAModelThatIsAFileOrMissing) {
  const auto model = file("model", "not a folder");
  expect_bad_input(crl({"generate", "--model", model.string(), "--prompt-ids", "1"}), {model.string(), "is a file, not a folder"});
  const auto missing = (dir_ / "missing").string();
  expect_bad_input(crl({"generate", "--model", missing, "--prompt-ids", "1"}), {missing, "does not exist"});
  expect_bad_input(crl({"init-model", "--out", (dir_ / "out").string(), "--corpus", missing}), {missing, "does not exist"});
}

TEST_F(InputErrorsCli, RunWithARunDirThatIsAFile) {
  const auto run_dir = file("run", "a file");
  expect_bad_input(crl({"run", job().string(), "--run-dir", run_dir.string()}), {run_dir.string(), "is a file"});
}

TEST_F(InputErrorsCli, MergeAndBestOfAMissingResultsFile) {
  const auto missing = (dir_ / "missing.h5").string();
  expect_bad_input(crl({"results", "merge", (dir_ / "out.h5").string(), missing}), {missing, "No such file"});
  expect_bad_input(crl({"results", "best", missing, "--out", (dir_ / "best.jsonl").string()}), {missing, "No such file"});
}

TEST_F(InputErrorsCli, OutputPathsThatAreFolders) {
  const auto run = results_file("run.h5", kRollouts);
  fs::create_directories(dir_ / "out");
  const auto out = (dir_ / "out").string();
  expect_bad_input(crl({"results", "best", run.string(), "--out", out}), {out});
  expect_bad_input(crl({"results", "merge", out, run.string()}), {out, "already exists"});
  expect_bad_input(crl({"eval", "--suite", kEvalSuite.string(), "--task", "level1/019_relu", kRelu.string(), "--backend",
                        "cpu", "--no-timing", "--h5", out}),
                   {out, "folder"});
}

TEST_F(InputErrorsCli, AResultsFileLockedByAnotherWriterNamesTheHolder) {
  const auto run = results_file("run.h5", kRollouts);
  const auto out = dir_ / "merged.h5";
  const int fd = ::open((out.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_bad_input(crl({"results", "merge", out.string(), run.string()}),
                   {out.string(), "already has a writer", fmt::format("process {} (", ::getpid())});
  ::close(fd);
}

// ---- files of the wrong format or schema -----------------------------------------------------------

TEST_F(InputErrorsCli, BestOfAStringSpeedupColumn) {
  TableSchema schema = kRollouts;
  schema[3].type = ColumnType::string;
  const auto run = results_file("run.h5", schema);
  expect_bad_input(crl({"results", "best", run.string(), "--out", (dir_ / "best.jsonl").string()}),
                   {run.string(), "rollouts/speedup", "holds string, not float64"});
}

// The analysis Python validates as the C++ does: a string speedup column is not a page of NaN.
TEST_F(InputErrorsCli, ReportOfAStringSpeedupColumn) {
  const char* home = std::getenv("HOME");
  const char* crl_home = std::getenv("CRL_HOME");
  const fs::path python = fs::path(crl_home && *crl_home ? crl_home : std::string(home ? home : "") + "/.local/share/crl") /
                          "venv" / "bin" / "python3";
  if (!fs::exists(python)) GTEST_SKIP() << "no analysis Python at " << python;
  TableSchema schema = kRollouts;
  schema[3].type = ColumnType::string;
  const auto run = results_file("run.h5", schema);
  const auto r = crl({"report", run.string(), "--out", (dir_ / "page").string()});
  expect_bad_input(r, {run.string(), "rollouts/speedup holds string, not float64"});
  EXPECT_FALSE(fs::exists(dir_ / "page" / "index.html")) << "a page was written from a string speedup column";
}

TEST_F(InputErrorsCli, BestOfAFloatWhereAnIntBelongs) {
  TableSchema schema = kRollouts;
  schema[0].type = ColumnType::float64;
  const auto run = results_file("run.h5", schema);
  expect_bad_input(crl({"results", "best", run.string(), "--out", (dir_ / "best.jsonl").string()}),
                   {run.string(), "rollouts/rollout_id", "holds float64, not int64"});
}

TEST_F(InputErrorsCli, MergeOfAMetaAttributeThatIsNotAString) {
  const auto run = results_file("run.h5", kRollouts);
  edit_hdf5(run, [](hid_t f) {
    const hid_t meta = H5Gopen2(f, "meta", H5P_DEFAULT);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(meta, "restarts", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    const std::int64_t value = 3;
    H5Awrite(attr, H5T_NATIVE_INT64, &value);
    H5Aclose(attr);
    H5Sclose(space);
    H5Gclose(meta);
  });
  expect_bad_input(crl({"results", "merge", (dir_ / "out.h5").string(), run.string()}),
                   {run.string(), "attribute 'restarts'", "not a variable-length string"});
}

TEST_F(InputErrorsCli, MergeOfColumnsOfDifferentLengths) {
  const auto run = results_file("run.h5", kRollouts);
  edit_hdf5(run, [](hid_t f) {
    const hid_t d = H5Dopen2(f, "rollouts/speedup", H5P_DEFAULT);
    const hsize_t two = 2;
    H5Dset_extent(d, &two);
    H5Dclose(d);
  });
  expect_bad_input(crl({"results", "merge", (dir_ / "out.h5").string(), run.string()}),
                   {run.string(), "damaged", "'speedup' has 2"});
}

// A damaged heap: the global heap collections (where HDF5 keeps variable-length strings) lose
// their signature, so every string, /meta's included, is unreadable.
TEST_F(InputErrorsCli, ResumeOfAFileWithADamagedHeap) {
  const auto h5 = results_file("verdicts.h5", kRollouts);
  {
    std::fstream f(h5, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    std::size_t damaged = 0;
    for (auto at = bytes.find("GCOL"); at != std::string::npos; at = bytes.find("GCOL", at + 4), ++damaged) {
      f.seekp(static_cast<std::streamoff>(at));
      f.write("XXXX", 4);
    }
    ASSERT_GT(damaged, 0u);
  }
  expect_bad_input(crl({"eval", "--suite", kEvalSuite.string(), "--task", "level1/019_relu", kRelu.string(), "--backend",
                        "cpu", "--no-timing", "--h5", h5.string(), "--resume"}),
                   {h5.string(), "damaged"});
}

TEST_F(InputErrorsCli, RunResumeOfAResultsFileOfAnotherSchema) {
  fs::create_directories(dir_ / "model");
  fs::create_directories(dir_ / "run");
  {
    results::ResultsWriter writer((dir_ / "run" / "results.h5").string());
    writer.declare_table("steps", {{"step", ColumnType::int64}, {"restart", ColumnType::float64}});
  }
  expect_bad_input(crl({"run", job().string(), "--run-dir", (dir_ / "run").string()}),
                   {"results.h5", "table 'steps'", "column 'stage'"});
}

// A candidate receives its task's spec; one that brings another (here the reference's with its
// input shape changed) is that candidate's format_error, as the same text is in the job: exit 1,
// the message naming the file and line, and a candidate beside it still judged.
TEST_F(InputErrorsCli, ACandidateWithASpecSectionIsAFormatError) {
  std::ifstream reference(kEvalSuite / "level1" / "019_relu.crl");
  std::string text(std::istreambuf_iterator<char>(reference), {});
  const auto spec_line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(text.find("// crl:spec")), '\n');
  const auto shape = text.find("shape: [");
  ASSERT_NE(shape, std::string::npos);
  text.insert(shape + 8, "2, ");
  const auto candidate = file("cand.crl", text);
  const auto r = crl({"eval", "--suite", kEvalSuite.string(), "--task", "level1/019_relu", candidate.string(), kRelu.string(),
                      "--backend", "cpu", "--no-timing", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto verdicts = nlohmann::json::parse(r.output.substr(r.output.find("[\n")));
  ASSERT_EQ(verdicts.size(), 2u) << r.output;
  EXPECT_EQ(verdicts[0]["status"], "format_error");
  const std::string message = verdicts[0]["message"];
  EXPECT_NE(message.find(fmt::format("{}:{}", candidate.string(), spec_line)), std::string::npos) << message;
  EXPECT_NE(message.find("'// crl:spec' section"), std::string::npos) << message;
  EXPECT_EQ(verdicts[1]["status"], "ok") << r.output;
  // The reference itself, spec and all, is still judged against itself (`crl eval jobs/suite`).
  const auto self = crl({"eval", "--suite", kEvalSuite.string(), "--task", "level1/019_relu",
                         (kEvalSuite / "level1" / "019_relu.crl").string(), "--backend", "cpu", "--no-timing"});
  EXPECT_EQ(self.exit_code, 0) << self.output;
}

// ---- parsers without a bound ------------------------------------------------------------------------

TEST_F(InputErrorsCli, AJobFileWithAnAliasCycle) {
  const auto path = file("cycle.yaml", "name: x\nmodel: m\nloop: &a [1, *a]\n");
  expect_bad_input(crl({"run", path.string()}), {"cycle.yaml:3", "an alias inside its own anchor"});
}

TEST_F(InputErrorsCli, AJobFileWithAnAliasBomb) {
  std::string text = "name: x\nmodel: m\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    text += fmt::format("a{0}: &a{0} [", level);
    for (int i = 0; i < 10; ++i) text += fmt::format("{}*a{}", i ? ", " : "", level - 1);
    text += "]\n";
  }
  const auto path = file("bomb.yaml", text);
  const auto r = crl({"run", path.string()});
  EXPECT_FALSE(r.timed_out);
  expect_bad_input(r, {"bomb.yaml", "more than 100000 values"});
}

TEST_F(InputErrorsCli, AJsonlLineNestedDeeply) {
  const auto path = file("deep.jsonl", "{\"task\": \"level1/019_relu\", \"program\": \"// crl:host\\nint x;\", \"id\": " +
                                           std::string(100000, '[') + std::string(100000, ']') + "}\n");
  expect_bad_input(crl({"eval", "--suite", kEvalSuite.string(), path.string(), "--backend", "cpu"}),
                   {"deep.jsonl:1", "nested deeper than 64 levels"});
}

TEST_F(InputErrorsCli, ASuiteWithASymlinkLoop) {
  fs::create_directories(dir_ / "suite" / "level1");
  fs::create_symlink("level9", dir_ / "suite" / "level9");
  expect_bad_input(crl({"tasks", "list", "--suite", (dir_ / "suite").string()}), {"level9", "symbolic links"});
}

// Level folders are level1 .. level1000: a number past int (std::stoi threw, exit 4) or past the
// bound is bad input naming the folder; the same suite without it lists its task.
TEST_F(InputErrorsCli, ASuiteWithALevelNumberOutOfRange) {
  const fs::path suite = dir_ / "suite";
  fs::create_directories(suite / "level1");
  fs::copy_file(kEvalSuite / "level1" / "019_relu.crl", suite / "level1" / "019_relu.crl");
  for (const char* level : {"level99999999999", "level1001", "level0"}) {
    fs::create_directories(suite / level);
    expect_bad_input(crl({"tasks", "list", "--suite", suite.string()}), {level, "out of range (level1 .. level1000)"});
    fs::remove(suite / level);
  }
  const auto listed = crl({"tasks", "list", "--suite", suite.string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("level1/019_relu"), std::string::npos) << listed.output;
}

// JSONL fields nested deeply, read by lib/rl's SFT reader for `crl data validate` and `crl run`'s
// input checks (`crl eval`: AJsonlLineNestedDeeply).
TEST_F(InputErrorsCli, SftDataNestedDeeply) {
  const std::string deep = "{\"task\": \"level1/019_relu\", \"program\": \"// crl:host\\nint x;\"}\n"
                           "{\"task\": \"level1/019_relu\", \"program\": \"// crl:host\\nint x;\", \"id\": {\"a\": " +
                           std::string(100000, '[') + std::string(100000, ']') + "}}\n";
  const auto path = file("deep.jsonl", deep);
  expect_bad_input(crl({"data", "validate", path.string(), "--out", (dir_ / "out.jsonl").string(), "--suite", kEvalSuite.string(),
                        "--backend", "cpu"}),
                   {"deep.jsonl:2", "nested deeper than 64 levels"});
  // crl run reads the sft stage's data before any model loads (after checking the model folder).
  const fs::path model = whole_model();
  const auto job_file =
      file("job.yaml", fmt::format("name: x\nmodel: {}\nprompt_format: raw\nstages:\n  - {{kind: sft, data: deep.jsonl}}\n", model.string()));
  expect_bad_input(crl({"run", job_file.string(), "--run-dir", (dir_ / "run").string()}),
                   {"deep.jsonl:2", "nested deeper than 64 levels"});
}

// A planted completion for a task the job does not have was skipped with a warning (exit 0): now
// bad input at start, naming the key; so is a planted file that cannot be read. Under mpirun: a
// crl stage needs an evaluator rank beside its trainer.
TEST_F(InputErrorsCli, APlantedCompletionForAnUnknownTask) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun on PATH";
  const fs::path model = whole_model();
  const auto run = [&](const std::string& task, const std::string& planted_file) {
    const auto job_file = file("job.yaml", fmt::format("name: x\nmodel: {}\nprompt_format: raw\nbackend: cpu\nsuite: {}\n"
                                                       "tasks: {{ids: [level1/019_relu]}}\n"
                                                       "stages:\n  - {{kind: crl, steps: 1, batch: 1, G: 2,\n"
                                                       "     planted: [{{task: level1/019_relu, file: {}}},\n"
                                                       "               {{task: {}, file: {}}}]}}\n",
                                                       model.string(), kEvalSuite.string(), kRelu.string(), task, planted_file));
    CommandOptions options{.timeout = std::chrono::seconds(120)};
    options.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
    return run_command(
        {mpirun, "-np", "2", "--oversubscribe", CRL_EXE, "run", job_file.string(), "--run-dir", (dir_ / "run").string()}, options);
  };
  expect_bad_input(run("level1/999_none", kRelu.string()), {"job.yaml", "stages[0].planted[1].task", "level1/999_none"});
  const std::string missing = (dir_ / "missing.crl").string();
  expect_bad_input(run("level1/019_relu", missing), {"job.yaml", "stages[0].planted[1].file", missing});
}

TEST_F(InputErrorsCli, ANumberOutOfRangeInAJobFile) {
  const auto path = job("eval: {trials: 99999999999999999999}\n");
  expect_bad_input(crl({"run", path.string()}), {"job.yaml:3", "eval.trials"});
}

}  // namespace
}  // namespace crl
