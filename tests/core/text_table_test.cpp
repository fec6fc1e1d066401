// Tests column alignment of text tables.
#include <gtest/gtest.h>

#include "core/text_table.h"

namespace crl {
namespace {

TEST(TextTable, AlignsColumns) {
  TextTable t({"id", "time"});
  t.add_row({"level1/001", "1.5 ms"});
  t.add_row({"x", "12 ms"});
  EXPECT_EQ(t.str(),
            "id          time\n"
            "------------------\n"
            "level1/001  1.5 ms\n"
            "x           12 ms\n");
}

TEST(TextTable, CountsUtf8CodePoints) {
  TextTable t({"a", "b"});
  t.add_row({"µs", "1"});
  EXPECT_EQ(t.str(), "a   b\n-----\nµs  1\n");
}

}  // namespace
}  // namespace crl
