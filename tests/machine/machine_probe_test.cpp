// Tests the machine probe on any machine: LibTorch, MPI and HDF5 are always found; JSON is complete.
#include <gtest/gtest.h>

#include "machine/machine_probe.h"

namespace crl {
namespace {

TEST(MachineProbe, FindsTheLibrariesCrlIsBuiltWith) {
  const auto report = probe_machine();
  for (const char* name : {"libtorch", "mpi", "hdf5"}) {
    const Component* c = report.find(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_TRUE(c->ok) << name << ": " << c->detail;
    EXPECT_FALSE(c->version.empty()) << name;
  }
  EXPECT_EQ(report.find("libtorch")->version.rfind("2.11", 0), 0u);
}

TEST(MachineProbe, EveryMissingPieceSaysHowToFixIt) {
  const auto report = probe_machine();
  for (const auto& c : report.components) {
    if (!c.ok) EXPECT_FALSE(c.fix.empty()) << c.name << " is missing but has no fix";
  }
}

TEST(MachineProbe, JsonNamesGpusAndLibTorch) {
  const auto j = probe_machine().to_json();
  ASSERT_TRUE(j.contains("gpus"));
  EXPECT_TRUE(j["gpus"].is_array());
  EXPECT_EQ(j["components"]["libtorch"]["version"].get<std::string>().rfind("2.11", 0), 0u);
  for (const char* k : {"gpu", "driver", "cuda_runtime", "nvcc", "nccl", "mpi", "hdf5", "libtorch"}) {
    EXPECT_TRUE(j["components"].contains(k)) << k;
  }
  EXPECT_TRUE(j["launch"].contains("rank"));
}

}  // namespace
}  // namespace crl
