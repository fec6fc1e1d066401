// Tests of nesting-bounded JSON parsing: deep input is bad input naming its origin, never a stack
// overflow in whoever touches the value later.
#include "core/json_bounded.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace crl
