// Runs the `crl` executable: doctor's JSON is valid and complete (capabilities included); usage
// errors exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>

#include "core/subprocess.h"

namespace crl {
namespace {

TEST(CrlCli, DoctorJsonIsValidAndNamesGpuAndLibTorch) {
  const auto r = run_command({CRL_EXE, "doctor", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // stdout and stderr are merged here; the JSON object is the whole of stdout.
  const auto begin = r.output.find('{');
  ASSERT_NE(begin, std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(begin));
  EXPECT_TRUE(j["gpus"].is_array());
  EXPECT_TRUE(j["components"]["gpu"].contains("ok"));
  EXPECT_EQ(j["components"]["libtorch"]["version"].get<std::string>().rfind("2.11", 0), 0u);
  // What crl can do here: the suite is found (250 tasks) and CPU evaluation is ready on any machine
  // this test runs on, and so is the job; GPU evaluation is ready exactly when a GPU is visible (and
  // a worker under the candidate sandbox computed on it: crl-worker --probe-cuda --worker-order).
  std::map<std::string, std::pair<std::string, std::string>> can;
  for (const auto& c : j["capabilities"]) can[c["name"]] = {c["status"], c["how"]};
  ASSERT_EQ(can.count("task suite"), 1u) << j.dump(2);
  EXPECT_EQ(can["task suite"].first, "ready");
  EXPECT_NE(can["task suite"].second.find("250 tasks"), std::string::npos) << can["task suite"].second;
  EXPECT_EQ(can["evaluate on the CPU"].first, "ready");
  EXPECT_EQ(can["evaluate on the GPU"].first == "ready", !j["gpus"].empty()) << j.dump(2);
  EXPECT_EQ(can["the job (crl run: SFT, self-training, contrastive RL)"].first, "ready") << j.dump(2);
}

TEST(CrlCli, DoctorTableListsComponents) {
  const auto r = run_command({CRL_EXE, "doctor"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"libtorch", "mpi", "hdf5", "nvcc", "nccl"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << name << " missing from:\n" << r.output;
  }
}

TEST(CrlCli, UnknownSubcommandIsAUsageError) {
  const auto r = run_command({CRL_EXE, "no-such-command"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace crl
