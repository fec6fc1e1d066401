// Data-parallel training on 2 GPUs through NCCL (label gpu; run on nvidia-h200-x2): after N steps
// both ranks hold bit-identical weights, and 2 ranks with batch B match 1 rank with batch 2B
// within fp32 round-off (looser than on the CPU: GPU kernels such as the embedding's backward add
// with atomics). And the NCCL watchdog: a rank that never joins an all-reduce makes its peer abort
// the communicator and fail within the timeout, naming the collective and the ranks. Skips,
// saying why, without 2 GPUs or without mpirun.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "collective_timeout_check.h"
#include "data_parallel_check.h"

namespace {

using crl::dist::testing::expect_data_parallel_agrees;
using crl::dist::testing::expect_peer_fails_in_time;
using crl::dist::testing::mpirun_problem;

TEST(DataParallelGpu, NcclRanksStayIdenticalAndMatchOneRankWithTheWholeBatch) {
  if (torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs 2 GPUs (found " << torch::cuda::device_count() << "): run on nvidia-h200-x2";
  }
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_data_parallel_agrees("cuda", "nccl", 1e-3, 1e-5);
}

TEST(CollectiveTimeoutGpu, NcclWatchdogAbortsWhenAPeerNeverJoins) {
  if (torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs 2 GPUs (found " << torch::cuda::device_count() << "): run on nvidia-h200-x2";
  }
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_peer_fails_in_time("all-reduce", "cuda", "NCCL all-reduce #1 (1024 Float elements)");
}

}  // namespace
