// Tests schemas, row batches and the UTF-8 clean-up of stored strings.
#include "results/table_schema.h"

#include <gtest/gtest.h>

#include <random>

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

// The simple reference: RFC 3629's table of well-formed byte sequences, one position at a time.
std::string reference_valid_utf8(const std::string& text) {
  std::string out;
  std::size_t i = 0;
  const auto in = [&](std::size_t k, unsigned lo, unsigned hi) {
    return k < text.size() && static_cast<unsigned char>(text[k]) >= lo &&
           static_cast<unsigned char>(text[k]) <= hi;
  };
  while (i < text.size()) {
    std::size_t n = 0;
    if (in(i, 0x01, 0x7F))
      n = 1;
    else if (in(i, 0xC2, 0xDF) && in(i + 1, 0x80, 0xBF))
      n = 2;
    else if (in(i, 0xE0, 0xE0) && in(i + 1, 0xA0, 0xBF) && in(i + 2, 0x80, 0xBF))
      n = 3;
    else if ((in(i, 0xE1, 0xEC) || in(i, 0xEE, 0xEF)) && in(i + 1, 0x80, 0xBF) &&
             in(i + 2, 0x80, 0xBF))
      n = 3;
    else if (in(i, 0xED, 0xED) && in(i + 1, 0x80, 0x9F) && in(i + 2, 0x80, 0xBF))
      n = 3;
    else if (in(i, 0xF0, 0xF0) && in(i + 1, 0x90, 0xBF) && in(i + 2, 0x80, 0xBF) &&
             in(i + 3, 0x80, 0xBF))
      n = 4;
    else if (in(i, 0xF1, 0xF3) && in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) &&
             in(i + 3, 0x80, 0xBF))
      n = 4;
    else if (in(i, 0xF4, 0xF4) && in(i + 1, 0x80, 0x8F) && in(i + 2, 0x80, 0xBF) &&
             in(i + 3, 0x80, 0xBF))
      n = 4;
    out += n ? text.substr(i, n) : "\xEF\xBF\xBD";
    i += n ? n : 1;
  }
  return out;
}

TEST(ToValidUtf8, MatchesTheReferenceOnRandomBytes) {
  // Mostly ASCII (the 8-byte fast path) with NULs, multi-byte sequences and stray bytes at
  // every offset within and across 8-byte blocks.
  std::mt19937 rng(12345);
  const std::vector<std::string> pieces = {
      "a",    "abcdefgh", std::string(1, '\0'), "\xC3\xA9",     "\xE4\xB8\xAD", "\xF0\x9F\x9A\x80",
      "\x80", "\xFF",     "\xE4\xB8",           "\xED\xA0\x80", "\xC0\xAF"};
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int count = static_cast<int>(rng() % 12);
    for (int k = 0; k < count; ++k) {
      text += rng() % 3 == 0 ? pieces[rng() % pieces.size()] : std::string(rng() % 9, 'x');
    }
    const auto cleaned = to_valid_utf8(text);
    ASSERT_EQ(cleaned, reference_valid_utf8(text)) << "trial " << trial;
    ASSERT_EQ(find_invalid_utf8(cleaned), std::string_view::npos);
    ASSERT_EQ(find_invalid_utf8(text) == std::string_view::npos, cleaned == text);
  }
}

}  // namespace
}  // namespace crl::results
