// Tests of nesting-bounded JSON parsing: deep input is bad input naming its origin, never a stack
// overflow in whoever touches the value later.
#include "core/json_bounded.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace crl {
namespace {

std::string nested(int depth) { return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']'); }

TEST(JsonBounded, DepthCountsArraysAndObjectsButNotStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[[", {}])"), 2);
}

TEST(JsonBounded, ParsesWhatIsWithinTheBound) {
  EXPECT_EQ(parse_json_bounded(nested(64), "x.json").dump(), nested(64));
  EXPECT_EQ(parse_json_bounded(R"({"task": "t", "id": [1, 2]})", "x.json")["id"][1], 2);
}

TEST(JsonBounded, RefusesDeeperNestingNamingTheOrigin) {
  try {
    parse_json_bounded(R"({"id": )" + nested(100000) + "}", "c.jsonl:3");
    FAIL() << "100000 levels were parsed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.jsonl:3: JSON nested deeper than 64 levels"), std::string::npos) << e.what();
  }
}

TEST(JsonBounded, SyntaxErrorsAreBadInput) {
  EXPECT_THROW(parse_json_bounded("{\"a\": ", "x.json"), InputError);
}

TEST(JsonBounded, TheJsonlScanNamesTheLine) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "crl_json_bounded.jsonl";
  std::ofstream(path) << "{\"task\": \"a\", \"program\": \"[[[[\"}\n"
                      << "\n"
                      << "{\"task\": \"b\", \"id\": " << nested(70) << "}\n";
  try {
    check_jsonl_nesting(path.string());
    FAIL() << "the scan missed line 3";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("crl_json_bounded.jsonl:3:"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "{\"task\": \"a\"}\n" << nested(64) << "\n";
  EXPECT_NO_THROW(check_jsonl_nesting(path.string()));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace crl
