// Verdicts in an HDF5 results file: appended rows read back equal, logs and steps included, the
// interval's width written beside each reward, and each candidate's kind (crl or kernelbench), also
// in files written before the column existed.
#include <gtest/gtest.h>

#include <algorithm>

#include "eval/scratch_dir.h"
#include "eval/verdict_table.h"

namespace crl::eval {
namespace {

Verdict sample(const std::string& name, VerdictStatus status) {
  Verdict v;
  v.task_id = "level1/019_relu";
  v.candidate = name;
  v.backend = "cpu";
  v.scale = "small";
  v.status = status;
  v.hack_kind = status == VerdictStatus::kHack ? "returned_input" : "";
  v.message = "message of " + name;
  v.trials_run = 5;
  v.trials_passed = status == VerdictStatus::kOk ? 5 : 2;
  v.reference_time = {100, 4, 30};
  v.candidate_time = {50, 2, 30};
  v.speedup = 2.0;
  v.speedup_ci_low = 1.9;
  v.speedup_ci_high = 2.1;
  v.reward = status == VerdictStatus::kOk ? 2.0 : 0.0;
  v.steps = {{"compile", true, "cache hit", 0.01}, {"trial 1", status == VerdictStatus::kOk, "detail", 0.5}};
  v.compile_log = "compiler said \xff something";  // invalid UTF-8 is stored replaced
  v.worker_log = "worker said hello";
  v.seconds = 1.25;
  return v;
}

TEST(VerdictTable, AppendedVerdictsReadBackEqual) {
  ScratchDir dir("crl_verdict_table_test_");
  const std::string path = dir.file("verdicts.h5");
  const std::vector<Verdict> first = {sample("a.crl", VerdictStatus::kOk), sample("b.crl", VerdictStatus::kMismatch)};
  std::vector<Verdict> second = {sample("c.crl", VerdictStatus::kHack), sample("d.py", VerdictStatus::kOk)};
  second[1].format = "kernelbench";
  {
    results::ResultsWriter writer(path);
    EXPECT_EQ(append_verdicts(writer, first), 0);
    writer.close();
  }
  {
    results::ResultsWriter writer(path);  // reopened: rows continue
    EXPECT_EQ(append_verdicts(writer, second), 2);
    writer.close();
  }
  const std::vector<Verdict> back = read_verdicts(results::ResultsReader(path));
  ASSERT_EQ(back.size(), 4u);
  std::vector<Verdict> all = first;
  all.insert(all.end(), second.begin(), second.end());
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].compile_log = results::to_valid_utf8(all[i].compile_log);
    EXPECT_EQ(to_json(back[i]), to_json(all[i])) << i;
  }
  EXPECT_EQ(back[2].status_text(), "hack:returned_input");
  EXPECT_EQ(back[0].format, "crl");
  EXPECT_EQ(back[3].format, "kernelbench");
  // The width reported with every reward is a column of its own, for readers of the file.
  const auto widths = std::get<std::vector<double>>(results::ResultsReader(path).column(kVerdictTable, "speedup_ci_half_width"));
  ASSERT_EQ(widths.size(), 4u);
  EXPECT_NEAR(widths[0], 0.05, 1e-12);  // (2.1 - 1.9) / 2 / 2.0
}

TEST(VerdictTable, AVerdictNotTimedHasWidthZero) {
  ScratchDir dir("crl_verdict_table_test_");
  const std::string path = dir.file("verdicts.h5");
  Verdict v = sample("untimed.crl", VerdictStatus::kMismatch);
  v.speedup = v.speedup_ci_low = v.speedup_ci_high = 0;
  {
    results::ResultsWriter writer(path);
    append_verdicts(writer, {v});
    writer.close();
  }
  const auto widths = std::get<std::vector<double>>(results::ResultsReader(path).column(kVerdictTable, "speedup_ci_half_width"));
  ASSERT_EQ(widths.size(), 1u);
  EXPECT_EQ(widths[0], 0.0);
}

// A file written before the baseline, width and format columns existed is appended to: it gains
// them, its earlier rows reading back as eager and crl, the new rows as written.
TEST(VerdictTable, AFileFromBeforeTheNewerColumnsIsAppendedTo) {
  ScratchDir dir("crl_verdict_table_test_");
  const std::string path = dir.file("old.h5");
  const results::TableSchema& schema = verdict_table_schema();
  const auto baseline = std::find_if(schema.begin(), schema.end(), [](const auto& c) { return c.name == "baseline"; });
  ASSERT_NE(baseline, schema.end());
  const results::TableSchema older(schema.begin(), baseline);
  {
    results::ResultsWriter writer(path);
    writer.declare_table(kVerdictTable, older);
    results::RowBatch batch(older);
    const Verdict v = sample("old.crl", VerdictStatus::kMismatch);
    batch.add_row({results::CellValue{int64_t{0}}, v.task_id, v.candidate, v.backend, v.scale, v.status_text(), v.message,
                   results::CellValue{int64_t{5}}, results::CellValue{int64_t{2}}, 100.0, 4.0, results::CellValue{int64_t{30}},
                   50.0, 2.0, results::CellValue{int64_t{30}}, 2.0, 1.9, 2.1, 0.0, 1.25});
    writer.append(kVerdictTable, batch);
    writer.close();
  }
  Verdict newer = sample("new.py", VerdictStatus::kOk);
  newer.format = "kernelbench";
  newer.baseline = "cuda_graph";
  {
    results::ResultsWriter writer(path);
    EXPECT_EQ(append_verdicts(writer, {newer}), 1);
    writer.close();
  }
  const std::vector<Verdict> back = read_verdicts(results::ResultsReader(path));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].candidate, "old.crl");
  EXPECT_EQ(back[0].baseline, "eager");
  EXPECT_EQ(back[0].format, "crl");
  EXPECT_EQ(back[1].baseline, "cuda_graph");
  EXPECT_EQ(back[1].format, "kernelbench");
}

}  // namespace
}  // namespace crl::eval
