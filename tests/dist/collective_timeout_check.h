// Shared by the dist tests: starts tests/dist/collective_timeout_worker on 2 ranks, one of which
// never joins the collective, and checks that the other fails within the timeout with a message
// naming the collective, its rank and its peer, instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/clock.h"
#include "core/subprocess.h"
#include "data_parallel_check.h"

namespace crl::dist::testing {

// `mode`: all-reduce or scalar; `device`: cpu (MPI) or cuda (NCCL); `collective`: how the message
// names it. The timeout is 1.5 s.
inline void expect_peer_fails_in_time(const std::string& mode, const std::string& device, const std::string& collective) {
  auto argv = mpirun_prefix(2);
  for (const std::string& a : {std::string(TIMEOUT_WORKER), mode, std::string("1500"), device}) argv.push_back(a);
  crl::CommandOptions options;
  options.timeout = std::chrono::seconds(100);  // the silent rank sleeps 120 s: waiting for it fails this
  const auto start = std::chrono::steady_clock::now();
  const auto result = crl::run_command(argv, options);
  const double seconds = crl::seconds_since(start);
  EXPECT_FALSE(result.ok()) << result.output;
  EXPECT_LT(seconds, 60.0) << "the job waited for the rank that never joined\n" << result.output;
  for (const std::string& expected : {std::string("CollectiveError after"), collective,
                                      std::string("did not finish within 1.5 s on rank 0 of 2"),
                                      std::string("peers: rank 1)")}) {
    EXPECT_NE(result.output.find(expected), std::string::npos) << "missing \"" << expected << "\" in\n" << result.output;
  }
}

}  // namespace crl::dist::testing
