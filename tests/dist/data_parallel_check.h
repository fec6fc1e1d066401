// Shared by the dist tests: runs tests/dist/dist_train_worker on 2 MPI ranks and on 1 rank with
// the whole batch, and checks that every rank holds bit-identical weights and that 2 ranks with
// batch B match 1 rank with batch 2B within round-off.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "policy/safetensors.h"

namespace crl::dist::testing {
namespace fs = std::filesystem;

inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("crl_dist_test_" + name + "_" + std::to_string(getpid()));
  remove_tree(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::vector<std::string> mpirun_prefix(int ranks) {
  return {"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", std::to_string(ranks)};
}

// Why mpirun cannot run 2 ranks here, or "" when it can.
inline std::string mpirun_problem() {
  if (crl::find_on_path("mpirun").empty()) return "mpirun is not on PATH";
  auto argv = mpirun_prefix(2);
  argv.push_back("true");
  crl::CommandOptions options;
  options.timeout = std::chrono::seconds(60);
  const auto result = crl::run_command(argv, options);
  if (!result.ok()) return "mpirun -np 2 true failed: " + result.output.substr(0, 400);
  return "";
}

inline std::map<std::string, torch::Tensor> weights(const fs::path& file) {
  return crl::policy::SafetensorsCheckpoint(file).load_all();
}

// `device`: "cpu" (MPI all-reduce) or "cuda" (NCCL, one GPU per rank); `backend`: what the worker
// must report using. Weights of 2 ranks vs 1 must agree within rtol/atol.
inline void expect_data_parallel_agrees(const std::string& device, const std::string& backend, double rtol, double atol) {
  const fs::path two = fresh_dir(device + "_two"), one = fresh_dir(device + "_one");
  crl::CommandOptions options;
  options.timeout = std::chrono::minutes(5);
  auto argv = mpirun_prefix(2);
  for (const std::string& a : {std::string(DIST_WORKER), two.string(), std::string("4"), std::string("4"), device}) argv.push_back(a);
  const auto r2 = crl::run_command(argv, options);
  ASSERT_TRUE(r2.ok()) << r2.output;
  // One rank, the whole batch, started without mpirun (an MPI singleton).
  const auto r1 = crl::run_command({DIST_WORKER, one.string(), "4", "4", device}, options);
  ASSERT_TRUE(r1.ok()) << r1.output;

  const auto rank0 = weights(two / "rank-0.safetensors");
  const auto rank1 = weights(two / "rank-1.safetensors");
  const auto single = weights(one / "rank-0.safetensors");
  ASSERT_EQ(rank0.size(), single.size());
  for (const auto& [name, t] : rank0) {
    EXPECT_TRUE(torch::equal(t, rank1.at(name))) << name << ": ranks differ";
    // A key bias adds the same score to every key of a query, which softmax cancels: its true
    // gradient is zero, so what backward yields is round-off that Adam scales into full-size steps.
    // Comparing it would compare noise (rl_train_step_test leaves it out for the same reason).
    if (name.ends_with("k_proj.bias")) continue;
    EXPECT_TRUE(torch::allclose(t, single.at(name), rtol, atol))
        << name << ": 2 ranks vs 1 rank max diff " << (t - single.at(name)).abs().max().item<float>();
  }
  const auto stats2 = nlohmann::json::parse(read_file(two / "rank-0.json", "2-rank statistics"));
  const auto stats1 = nlohmann::json::parse(read_file(one / "rank-0.json", "1-rank statistics"));
  EXPECT_EQ(stats2["backend"], backend);
  for (size_t s = 0; s < stats2["steps"].size(); ++s) {
    EXPECT_EQ(stats2["steps"][s]["tokens"], stats1["steps"][s]["tokens"]);
    EXPECT_NEAR(stats2["steps"][s]["loss"].get<double>(), stats1["steps"][s]["loss"].get<double>(), 1e-5);
    // Overlap: buckets went out during backward, not all at the end.
    EXPECT_GT(stats2["steps"][s]["buckets_during_backward"].get<int>(), 0);
    EXPECT_GT(stats2["steps"][s]["buckets"].get<int>(), 1);
  }
  remove_tree(two);
  remove_tree(one);
}

}  // namespace crl::dist::testing
