// Runs the `crl` executable: doctor's JSON is valid and complete; usage errors exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
