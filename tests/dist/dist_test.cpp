// Data-parallel training on CPU ranks through MPI (the same reducer code path NCCL takes on
// GPUs): after N steps every rank holds bit-identical weights, and 2 ranks with batch B match
// 1 rank with batch 2B within fp32 round-off. Skips, saying why, when mpirun cannot start 2 ranks.
#include <gtest/gtest.h>

#include "data_parallel_check.h"

namespace {

using crl::dist::testing::expect_data_parallel_agrees;
using crl::dist::testing::mpirun_problem;

TEST(DataParallel, RanksStayIdenticalAndMatchOneRankWithTheWholeBatch) {
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_data_parallel_agrees("cpu", "mpi", 1e-4, 2e-6);
}

}  // namespace
