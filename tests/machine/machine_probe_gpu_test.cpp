// GPU test: the probe sees the machine's GPUs with plausible properties (Hopper reports 9.0).
#include <gtest/gtest.h>

#include "machine/machine_probe.h"

namespace crl {
namespace {

TEST(MachineProbeGpu, SeesGpusWithComputeCapability) {
  const auto report = probe_machine();
  if (report.gpus.empty()) {
    GTEST_SKIP() << "no CUDA GPU visible on this machine: " << report.find("gpu")->detail;
  }
  EXPECT_TRUE(report.find("gpu")->ok);
  EXPECT_TRUE(report.find("driver")->ok);
  for (const auto& g : report.gpus) {
    EXPECT_GE(g.cc_major, 7) << g.name;
    EXPECT_GT(g.memory_gib, 1.0) << g.name;
    EXPECT_GT(g.multiprocessors, 0) << g.name;
    if (g.name.find("H200") != std::string::npos || g.name.find("H100") != std::string::npos) {
      EXPECT_EQ(g.cc_major, 9) << g.name;
      EXPECT_EQ(g.cc_minor, 0) << g.name;
    }
    std::printf("GPU %d: %s, %.1f GiB, compute capability %d.%d, %d SMs\n", g.index, g.name.c_str(),
                g.memory_gib, g.cc_major, g.cc_minor, g.multiprocessors);
  }
}

}  // namespace
}  // namespace crl
