// The timed outputs' CUDA IPC exports (exchange.h's ExportedAllocations, describe_batch): each
// allocation exported once across a worker's timed batches, an allocation made again at a freed
// address exported anew, the reference's timing worker exporting nothing (label gpu; skipped without
// a GPU).
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "machine/machine_probe.h"
#include "worker/exchange.h"

namespace crl::worker {
namespace {

class GpuExports : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_visible()) GTEST_SKIP() << "no CUDA GPU visible: CUDA IPC exports cannot run here";
  }
};

// A batch of `calls` calls of two outputs each, every output 8 MiB (each in a segment of its own).
std::vector<std::vector<at::Tensor>> batch_of(int calls) {
  std::vector<std::vector<at::Tensor>> outputs;
  for (int c = 0; c < calls; ++c) {
    outputs.push_back({at::full({2 << 20}, c, at::device(at::kCUDA)), at::full({2 << 20}, -c, at::device(at::kCUDA))});
  }
  return outputs;
}

std::set<std::string> handles_of(const nlohmann::json& described) {
  std::set<std::string> handles;
  for (const auto& h : described["handles"]) handles.insert(h.get<std::string>());
  return handles;
}

TEST_F(GpuExports, BatchesReusingTheirAllocationsExportEachOnce) {
  c10::cuda::CUDACachingAllocator::emptyCache();
  ExportedAllocations exports;
  std::vector<at::Tensor> held;
  const nlohmann::json first = describe_batch(batch_of(4), &held, &exports);
  const size_t after_first = exports.exported();
  EXPECT_EQ(after_first, handles_of(first).size());
  EXPECT_GE(after_first, 1u);
  held.clear();  // as the worker does at its next request: the next batch reuses the freed blocks
  const nlohmann::json second = describe_batch(batch_of(4), &held, &exports);
  EXPECT_EQ(exports.exported(), after_first) << "the second batch's outputs lie in allocations already exported";
  EXPECT_EQ(handles_of(second), handles_of(first));
  // Each call's outputs still have places of their own.
  const auto call0 = batch_call_refs(second, 0, 4);
  const auto call3 = batch_call_refs(second, 3, 4);
  ASSERT_EQ(call0.size(), 2u);
  EXPECT_TRUE(call0[0].ipc_handle != call3[0].ipc_handle || call0[0].offset != call3[0].offset);
}

TEST_F(GpuExports, AnAllocationFreedAndMadeAgainIsExportedAnew) {
  ExportedAllocations exports;
  std::vector<at::Tensor> held;
  describe_batch(batch_of(1), &held, &exports);
  const size_t before = exports.exported();
  held.clear();
  // The segments go back to the driver; new ones (at the same addresses or not) are other allocations.
  c10::cuda::CUDACachingAllocator::emptyCache();
  describe_batch(batch_of(1), &held, &exports);
  EXPECT_GT(exports.exported(), before) << "a handle kept for freed memory would describe another allocation";
}

TEST_F(GpuExports, TheReferencesTimingWorkerExportsNothing) {
  std::vector<at::Tensor> held;
  const nlohmann::json described = describe_batch(batch_of(2), &held, nullptr);
  EXPECT_EQ(handles_of(described), std::set<std::string>{""});
}

}  // namespace
}  // namespace crl::worker
