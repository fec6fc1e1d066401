// Data-parallel training on 2 GPUs through NCCL (label gpu; run on nvidia-h200-x2): after N steps
// both ranks hold bit-identical weights, and 2 ranks with batch B match 1 rank with batch 2B
// within fp32 round-off (looser than on the CPU: GPU kernels such as the embedding's backward add
// with atomics). Skips, saying why, without 2 GPUs or without mpirun.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "data_parallel_check.h"

namespace {

using crl::dist::testing::expect_data_parallel_agrees;
using crl::dist::testing::mpirun_problem;

TEST(DataParallelGpu, NcclRanksStayIdenticalAndMatchOneRankWithTheWholeBatch) {
  if (torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs 2 GPUs (found " << torch::cuda::device_count() << "): run on nvidia-h200-x2";
  }
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_data_parallel_agrees("cuda", "nccl", 1e-3, 1e-5);
}

}  // namespace
