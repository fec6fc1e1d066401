// Tests that tools/analysis/read_results.py (h5py only) reads back exactly what the C++ wrote:
// the "anyone with h5py can read it" promise, while the writer still has the file open.
// Skipped, with the reason, when h5py is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/subprocess.h"
#include "results/results_writer.h"
#include "results_test_util.h"
#include "venv_python.h"

namespace crl::results {
namespace {

using testing::ScratchDir;

// The venv tools/setup.sh makes (CRL_HOME or ~/.local/share/crl), which has h5py.
TEST(ReadResultsPy, ReadsWhatTheCppWriterWrote) {
  const auto python = crl::testing::venv_python();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << "no crl venv python at " << python;
  const auto probe = run_command({python, "-c", "import h5py"});
  if (!probe.ok()) GTEST_SKIP() << "h5py is not installed in " << python << ": " << probe.output;

  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const TableSchema schema = {{"step", ColumnType::int64},
                              {"mean_speedup", ColumnType::float64},
                              {"all_correct", ColumnType::boolean},
                              {"task", ColumnType::string}};
  // The writer stays open (as in a running job) while Python reads what it flushed.
  ResultsWriter writer(path, {.chunk_rows = 2});
  {
    writer.declare_table("steps", schema);
    RowBatch batch(schema);
    batch.add_row({std::int64_t{0}, 1.25, true, "gemm"});
    batch.add_row({std::int64_t{-9007199254740993}, 0.5, false, "Ünïcødé 中文 🚀"});
    batch.add_row({std::int64_t{2}, 1e300, true, ""});
    writer.append("steps", batch);
    writer.set_meta("git_commit", "0123abcd");
    writer.set_meta_json("job_config", {{"group_size", 16}, {"stage", "rl"}});
    writer.put_texts("completions", {7, 8}, {"def f(): ✓", "line1\nline2"});
    writer.flush();
  }
  const auto script = std::string(CRL_SOURCE_DIR) + "/tools/analysis/read_results.py";
  const auto result = run_command({python, script, path, "--json"}, {.max_output = 1 << 22});
  ASSERT_TRUE(result.ok()) << result.output;
  const auto got = nlohmann::json::parse(result.output);

  EXPECT_EQ(got["format_version"], 1);
  EXPECT_EQ(got["meta"]["git_commit"], "0123abcd");
  EXPECT_EQ(nlohmann::json::parse(got["meta"]["job_config"].get<std::string>()),
            (nlohmann::json{{"group_size", 16}, {"stage", "rl"}}));
  const auto& steps = got["tables"]["steps"];
  EXPECT_EQ(steps["rows"], 3);
  EXPECT_EQ(steps["columns"], (nlohmann::json{{"step", "int64"},
                                              {"mean_speedup", "float64"},
                                              {"all_correct", "bool"},
                                              {"task", "string"}}));
  EXPECT_EQ(steps["data"]["step"], (nlohmann::json{0, -9007199254740993, 2}));
  EXPECT_EQ(steps["data"]["mean_speedup"], (nlohmann::json{1.25, 0.5, 1e300}));
  EXPECT_EQ(steps["data"]["all_correct"], (nlohmann::json{true, false, true}));
  EXPECT_EQ(steps["data"]["task"], (nlohmann::json{"gemm", "Ünïcødé 中文 🚀", ""}));
  // Plain h5py with its default file locking is not blocked by the writer either.
  const auto plain = run_command(
      {python, "-c", "import h5py, sys; print(h5py.File(sys.argv[1], 'r')['steps/step'].shape[0])",
       path});
  EXPECT_TRUE(plain.ok()) << plain.output;
  EXPECT_EQ(plain.output, "3\n");
  EXPECT_EQ(got["text"]["completions"],
            (nlohmann::json{{"7", "def f(): ✓"}, {"8", "line1\nline2"}}));
}

}  // namespace
}  // namespace crl::results
