// Every hack kind the judge can name is documented: docs/hack-guards.md lists `hack:<kind>` for each.
#include <gtest/gtest.h>

#include "core/read_file.h"
#include "eval/hack_kind.h"

namespace crl::eval {
namespace {

TEST(HackKind, EveryKindIsListedInTheHackGuardsDoc) {
  const std::string doc = read_file(std::string(CRL_SOURCE_DIR) + "/docs/hack-guards.md", "the hack guards doc");
  ASSERT_FALSE(all_hack_kinds().empty());
  for (const HackKind kind : all_hack_kinds()) {
    const std::string word = "`hack:" + std::string(hack_kind_name(kind)) + "`";
    EXPECT_NE(doc.find(word), std::string::npos) << word << " is not in docs/hack-guards.md";
  }
}

TEST(HackKind, NamesRoundTripAndUnknownNamesAreNotKinds) {
  for (const HackKind kind : all_hack_kinds()) EXPECT_EQ(parse_hack_kind(hack_kind_name(kind)), kind);
  EXPECT_FALSE(parse_hack_kind("returned_input").has_value());
  EXPECT_FALSE(parse_hack_kind("").has_value());
  EXPECT_EQ(hack_kind_name(HackKind::none), "");
}

}  // namespace
}  // namespace crl::eval
