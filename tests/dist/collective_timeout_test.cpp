// A rank that never joins a collective makes its peer fail within the communicator's timeout,
// with a message naming the collective, the rank and its peers, instead of hanging: the MPI path
// (CPU ranks) under mpirun. Skips, saying why, when mpirun cannot start 2 ranks.
#include <gtest/gtest.h>

#include "collective_timeout_check.h"

namespace {

using crl::dist::testing::expect_peer_fails_in_time;
using crl::dist::testing::mpirun_problem;

TEST(CollectiveTimeout, TensorAllReduceFailsWhenAPeerNeverJoins) {
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_peer_fails_in_time("all-reduce", "cpu", "MPI all-reduce #1 (1024 Float elements)");
}

TEST(CollectiveTimeout, ScalarAllReduceFailsWhenAPeerNeverJoins) {
  const std::string problem = mpirun_problem();
  if (!problem.empty()) GTEST_SKIP() << problem;
  expect_peer_fails_in_time("scalar", "cpu", "MPI scalar all-reduce");
}

}  // namespace
