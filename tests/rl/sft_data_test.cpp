// SFT JSONL (rl/sft_data.h): what the sft stage, `crl data validate` and `crl eval X.jsonl` read.
// A line nested too deeply is bad input naming its line, never a stack overflow in dump().
#include "rl/sft_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace crl::rl {
namespace {

namespace fs = std::filesystem;

std::string nested(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

class SftData : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    std::ofstream(path_, std::ios::binary) << text;
    return path_;
  }
  void TearDown() override { fs::remove(path_); }

  const fs::path path_ = fs::path(::testing::TempDir()) / ("crl_sft_data_" + std::to_string(::getpid()) + ".jsonl");
};

const std::string kLine = R"({"task": "level1/019_relu", "program": "// crl:host\nint x;")";

std::string error_of(const fs::path& path) {
  try {
    read_sft_jsonl(path.string());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST_F(SftData, ReadsLinesAndTheirIds) {
  const auto examples = read_sft_jsonl(write(kLine + "}\n\n" + kLine + R"(, "id": [1, [2]], "speedup": 1.5})" + "\n").string());
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].id, "line 1");
  EXPECT_EQ(examples[1].id, "[1,[2]]");  // an id that is not a string is its JSON
  EXPECT_EQ(examples[1].line, 3);
  ASSERT_TRUE(examples[1].speedup.has_value());
  EXPECT_EQ(*examples[1].speedup, 1.5);
}

TEST_F(SftData, AFieldNestedDeeplyIsBadInputNamingTheLine) {
  const fs::path path = write(kLine + "}\n" + kLine + R"(, "id": )" + nested(100000) + "}\n");
  const std::string what = error_of(path);
  EXPECT_NE(what.find(path.string() + ":2: JSON nested deeper than 64 levels"), std::string::npos) << what;
  // At the bound it is read (and its id dumped).
  EXPECT_EQ(read_sft_jsonl(write(kLine + R"(, "id": )" + nested(63) + "}\n").string())[0].id, nested(63));
}

TEST_F(SftData, LinesThatAreNotJsonObjectsAreBadInputNamingTheLine) {
  const fs::path path = write(kLine + "}\n{\"task\": \n");
  EXPECT_NE(error_of(path).find(path.string() + ":2: not valid JSON"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of(write("[1]\n")).find(":1: not a JSON object"), std::string::npos) << error_of(path_);
}

}  // namespace
}  // namespace crl::rl
