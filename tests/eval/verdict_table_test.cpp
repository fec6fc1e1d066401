// Verdicts in an HDF5 results file: appended rows read back equal, logs and steps included, and the
// interval's width written beside each reward.
#include <gtest/gtest.h>

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
  const std::vector<Verdict> second = {sample("c.crl", VerdictStatus::kHack)};
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
  ASSERT_EQ(back.size(), 3u);
  std::vector<Verdict> all = first;
  all.push_back(second[0]);
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].compile_log = results::to_valid_utf8(all[i].compile_log);
    EXPECT_EQ(to_json(back[i]), to_json(all[i])) << i;
  }
  EXPECT_EQ(back[2].status_text(), "hack:returned_input");
  // The width reported with every reward is a column of its own, for readers of the file.
  const auto widths = std::get<std::vector<double>>(results::ResultsReader(path).column(kVerdictTable, "speedup_ci_half_width"));
  ASSERT_EQ(widths.size(), 3u);
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

}  // namespace
}  // namespace crl::eval
