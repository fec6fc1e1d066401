// The reference check on the GPU: its own runs (in the checking process) give their memory back to
// the driver before the evaluator's judge and workers, other processes, need it.
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "shared_test_cache.h"
#include "eval/reference_check.h"
#include "suite/suite.h"

namespace crl::eval {
namespace {

TEST(ReferenceCheckGpu, TheChecksOwnRunsLeaveNoCachedDeviceMemoryBehind) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)";
  const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  const Task& norm = suite.find("level1/036_rms_norm");
  ReferenceCheckOptions o;
  o.scale = "small";
  o.backend = Backend::cuda;
  o.time_budget_seconds = 0;  // the check's own runs only
  o.compiler.cache_dir = crl::testing::shared_test_cache_dir();
  const ReferenceCheckReport report = check_references({&norm}, o);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, "ok") << report.results[0].message;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  using Stat = c10::CachingAllocator::StatType;
  EXPECT_EQ(stats.reserved_bytes[static_cast<size_t>(Stat::AGGREGATE)].current, 0)
      << "bytes the caching allocator still holds after the check (the judge's and the workers' memory)";
  EXPECT_GT(stats.reserved_bytes[static_cast<size_t>(Stat::AGGREGATE)].peak, 0) << "the check ran nothing on the GPU";
}

}  // namespace
}  // namespace crl::eval
