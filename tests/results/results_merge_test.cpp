// Tests merge_results_files: rows of every part in order, ids shifted so they stay unique and text
// stores still point at their rows, every part's /meta kept, and the refusals (existing output,
// a part given twice, schemas that differ) leaving nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "results/results_merge.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "results_test_util.h"

namespace crl::results {
namespace {

using testing::ScratchDir;

const TableSchema kRolloutSchema = {{"rollout_id", ColumnType::int64},
                                    {"task", ColumnType::string},
                                    {"exemplar_ids", ColumnType::string},
                                    {"parent_id", ColumnType::int64}};

// A part like a job's: rollouts with ids from 0, each with its program text, a parent and exemplars
// among earlier rollouts (-1: no parent), and /meta.
void write_part(const std::string& path, const std::string& task, int rollouts, const std::string& slice) {
  ResultsWriter writer(path);
  writer.declare_table("rollouts", kRolloutSchema);
  RowBatch batch(kRolloutSchema);
  for (std::int64_t id = 0; id < rollouts; ++id) {
    batch.add_row({CellValue{id}, task, id == 0 ? std::string() : std::string("0,") + std::to_string(id - 1),
                   CellValue{id - 1}});
    writer.put_text("programs", id, task + " program " + std::to_string(id));
  }
  writer.append("rollouts", batch);
  writer.set_meta("git_commit", "abc123");
  writer.set_meta("eval_slice", slice);
  writer.close();
}

template <typename T>
std::vector<T> column_of(const ResultsReader& reader, const std::string& table, const std::string& column) {
  return std::get<std::vector<T>>(reader.column(table, column));
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error thrown)";
}

TEST(ResultsMerge, ShiftsIdsSoTheyStayUniqueAndTextsFollowTheirRows) {
  ScratchDir dir;
  write_part(dir.file("a.h5"), "relu", 3, "0/2");
  write_part(dir.file("b.h5"), "tanh", 2, "1/2");
  const auto summary = merge_results_files(dir.file("all.h5"), {dir.file("a.h5"), dir.file("b.h5")});

  ASSERT_EQ(summary.parts.size(), 2u);
  EXPECT_EQ(summary.parts[0].id_offset, 0);
  EXPECT_EQ(summary.parts[1].id_offset, 3);
  EXPECT_EQ(summary.rows.at("rollouts"), 5);
  EXPECT_EQ(summary.texts.at("programs"), 5);

  ResultsReader merged(dir.file("all.h5"));
  EXPECT_EQ(column_of<std::int64_t>(merged, "rollouts", "rollout_id"), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(column_of<std::string>(merged, "rollouts", "task"),
            (std::vector<std::string>{"relu", "relu", "relu", "tanh", "tanh"}));
  // Exemplar lists and parent ids name the part's own rollouts, shifted with them; -1 ("none") stays.
  EXPECT_EQ(column_of<std::string>(merged, "rollouts", "exemplar_ids"),
            (std::vector<std::string>{"", "0,0", "0,1", "", "3,3"}));
  EXPECT_EQ(column_of<std::int64_t>(merged, "rollouts", "parent_id"), (std::vector<std::int64_t>{-1, 0, 1, -1, 3}));
  EXPECT_EQ(merged.text("programs", 2), "relu program 2");
  EXPECT_EQ(merged.text("programs", 3), "tanh program 0");
  EXPECT_EQ(merged.text("programs", 4), "tanh program 1");
}

TEST(ResultsMerge, KeepsEveryPartsMetaAndTheKeysTheyAgreeOn) {
  ScratchDir dir;
  write_part(dir.file("a.h5"), "relu", 1, "0/2");
  write_part(dir.file("b.h5"), "tanh", 1, "1/2");
  merge_results_files(dir.file("all.h5"), {dir.file("a.h5"), dir.file("b.h5")});

  ResultsReader merged(dir.file("all.h5"));
  EXPECT_EQ(merged.meta("git_commit"), "abc123");
  const auto keys = merged.meta_keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "eval_slice"), 0) << "the parts differ on it";
  const auto parts = merged.meta_json("merged_parts");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]["file"], dir.file("a.h5"));
  EXPECT_EQ(parts[0]["meta"]["eval_slice"], "0/2");
  EXPECT_EQ(parts[1]["meta"]["eval_slice"], "1/2");
  EXPECT_EQ(parts[1]["id_offset"], 1);
  EXPECT_EQ(parts[1]["rows"]["rollouts"], 1);
}

TEST(ResultsMerge, AMergedFileMergesAgainWithItsIdsStillUnique) {
  ScratchDir dir;
  write_part(dir.file("a.h5"), "relu", 2, "0/3");
  write_part(dir.file("b.h5"), "tanh", 2, "1/3");
  write_part(dir.file("c.h5"), "gelu", 2, "2/3");
  merge_results_files(dir.file("ab.h5"), {dir.file("a.h5"), dir.file("b.h5")});
  merge_results_files(dir.file("abc.h5"), {dir.file("ab.h5"), dir.file("c.h5")});
  ResultsReader merged(dir.file("abc.h5"));
  EXPECT_EQ(column_of<std::int64_t>(merged, "rollouts", "rollout_id"),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(merged.text("programs", 5), "gelu program 1");
}

TEST(ResultsMerge, RefusesAnExistingOutputAndAPartGivenTwice) {
  ScratchDir dir;
  write_part(dir.file("a.h5"), "relu", 1, "0/1");
  EXPECT_NE(message_of([&] { merge_results_files(dir.file("a.h5"), {dir.file("a.h5")}); }).find("already exists"),
            std::string::npos);
  EXPECT_NE(message_of([&] { merge_results_files(dir.file("x.h5"), {dir.file("a.h5"), dir.file("a.h5")}); })
                .find("given twice"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.h5")));
}

TEST(ResultsMerge, RefusesTablesWhoseSchemasDifferNamingTheFileAndTable) {
  ScratchDir dir;
  write_part(dir.file("a.h5"), "relu", 1, "0/2");
  {
    ResultsWriter other(dir.file("b.h5"));
    other.declare_table("rollouts", {{"rollout_id", ColumnType::int64}});
  }
  const auto message = message_of([&] { merge_results_files(dir.file("all.h5"), {dir.file("a.h5"), dir.file("b.h5")}); });
  EXPECT_NE(message.find(dir.file("b.h5")), std::string::npos) << message;
  EXPECT_NE(message.find("'rollouts'"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir.file("all.h5")));
}

TEST(ResultsMerge, AMalformedIdListIsBadInputAndLeavesNoHalfMergedFile) {
  ScratchDir dir;
  {
    ResultsWriter part(dir.file("a.h5"));
    part.declare_table("rollouts", kRolloutSchema);
    RowBatch batch(kRolloutSchema);
    batch.add_row({CellValue{std::int64_t{0}}, std::string("relu"), std::string("1,,2"), CellValue{std::int64_t{0}}});
    part.append("rollouts", batch);
  }
  EXPECT_THROW(merge_results_files(dir.file("all.h5"), {dir.file("a.h5")}), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("all.h5")));
}

}  // namespace
}  // namespace crl::results
