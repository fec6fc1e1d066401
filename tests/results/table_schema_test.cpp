// Tests schemas, row batches and the UTF-8 clean-up of stored strings.
#include "results/table_schema.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace crl::results {
namespace {

const TableSchema kSchema = {{"step", ColumnType::int64},
                             {"reward", ColumnType::float64},
                             {"correct", ColumnType::boolean},
                             {"task", ColumnType::string}};

TEST(RowBatch, KeepsRowsColumnByColumn) {
  RowBatch batch(kSchema);
  batch.add_row({std::int64_t{1}, 0.5, true, "gemm"});
  batch.add_row({std::int64_t{2}, 1.5, false, "conv"});
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(batch.column(0)),
            (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(std::get<std::vector<double>>(batch.column(1)), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(std::get<std::vector<bool>>(batch.column(2)), (std::vector<bool>{true, false}));
  EXPECT_EQ(std::get<std::vector<std::string>>(batch.column(3)),
            (std::vector<std::string>{"gemm", "conv"}));
}

TEST(RowBatch, WrongTypeNamesTheColumnAndLeavesTheBatchAlone) {
  RowBatch batch(kSchema);
  batch.add_row({std::int64_t{1}, 0.5, true, "gemm"});
  try {
    batch.add_row({std::int64_t{2}, std::int64_t{3}, true, "conv"});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'reward'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("int64"), std::string::npos) << msg;
  }
  EXPECT_EQ(batch.rows(), 1u);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(batch.column(0)).size(), 1u);
}

TEST(RowBatch, WrongValueCountIsAnInputError) {
  RowBatch batch(kSchema);
  EXPECT_THROW(batch.add_row({std::int64_t{1}, 0.5}), InputError);
  EXPECT_EQ(batch.rows(), 0u);
}

TEST(TableSchema, NamesMustBeIdentifiersAndUnique) {
  EXPECT_NO_THROW(check_schema("steps", kSchema));
  EXPECT_THROW(check_schema("steps", {}), InputError);
  EXPECT_THROW(check_schema("steps", {{"a", ColumnType::int64}, {"a", ColumnType::string}}),
               InputError);
  for (const char* bad : {"", "a/b", "1st", "a.b", "with space", "ü"}) {
    EXPECT_THROW(check_result_name("column", bad), InputError) << bad;
  }
  EXPECT_NO_THROW(check_result_name("column", "speedup_p50"));
  EXPECT_EQ(describe_schema({{"a", ColumnType::int64}, {"b", ColumnType::boolean}}),
            "a:int64, b:bool");
}

TEST(ToValidUtf8, KeepsValidTextByteForByte) {
  const std::string text = "plain, é, 中文, 🚀, \x7f";
  EXPECT_EQ(to_valid_utf8(text), text);
  EXPECT_EQ(to_valid_utf8(""), "");
}

TEST(ToValidUtf8, ReplacesEachBadByteAndNul) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(to_valid_utf8(std::string("a\0b", 3)), "a" + replacement + "b");
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b"),
            "a" + replacement + "b");
  // Overlong encoding of '/', a UTF-16 surrogate, a code point above U+10FFFF, a cut sequence.
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), replacement + replacement);
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), replacement + replacement + replacement);
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"),
            replacement + replacement + replacement + replacement);
  EXPECT_EQ(to_valid_utf8("ok\xE4\xB8"), "ok" + replacement + replacement);
}

}  // namespace
}  // namespace crl::results
