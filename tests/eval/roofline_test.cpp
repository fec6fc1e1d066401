// The roofline table and the least time it allows.
#include "eval/roofline.h"

#include <gtest/gtest.h>

namespace crl::eval {
namespace {

TEST(Roofline, KnowsTheDataCentreGpusByTheirCudaNames) {
  ASSERT_TRUE(peaks_for_device("NVIDIA H200").has_value());
  EXPECT_EQ(peaks_for_device("NVIDIA H200")->model, "H200");
  EXPECT_EQ(peaks_for_device("NVIDIA H100 80GB HBM3")->model, "H100");
  EXPECT_EQ(peaks_for_device("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_EQ(peaks_for_device("NVIDIA A100-SXM4-80GB")->model, "A100-SXM4-80GB");
  EXPECT_FALSE(peaks_for_device("NVIDIA GeForce GT 710").has_value());
  EXPECT_FALSE(peaks_for_device("").has_value());
}

TEST(Roofline, TheLeastTimeIsTheSlowerOfMemoryAndCompute) {
  const DevicePeaks peaks{"test", 1e12, 1e15};
  // 1 GB at 1 TB/s is 1 ms; 1e9 flops at 1 Pflop/s is 1 us: memory decides.
  EXPECT_DOUBLE_EQ(roofline_seconds(1e9, 1e9, peaks, 1.0), 1e-3);
  EXPECT_DOUBLE_EQ(roofline_seconds(1e3, 1e13, peaks, 1.0), 1e-2);
  EXPECT_DOUBLE_EQ(roofline_seconds(1e9, 0, peaks, 2.0), 0.5e-3);
  EXPECT_DOUBLE_EQ(roofline_seconds(1e9, 0, peaks, 0.5), 1e-3);  // a margin below 1 is taken as 1
}

}  // namespace
}  // namespace crl::eval
