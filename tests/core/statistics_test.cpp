// Tests core's median, the one median of crl (timing statistics, the reference check, benchmarks).
#include <gtest/gtest.h>

#include <vector>

#include "core/statistics.h"

namespace crl {
namespace {

TEST(Median, MiddleValueOfOddCountMeanOfTwoMiddleOfEvenCount) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(Median, InPlaceOnAScratchBufferAgreesWithMedian) {
  std::vector<double> values{9, 2, 7, 4, 5, 1};
  const double expected = median(values);  // takes a copy: values keep their order
  EXPECT_EQ(values, (std::vector<double>{9, 2, 7, 4, 5, 1}));
  EXPECT_DOUBLE_EQ(median_in_place(values), expected);
  EXPECT_DOUBLE_EQ(expected, 4.5);
}

}  // namespace
}  // namespace crl
