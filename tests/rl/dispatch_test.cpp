// Pull-based dispatch over 3 MPI ranks (dispatch_worker): every program judged once, verdicts
// back by work id, a slow program holding only its own evaluator, crl's own failure an internal_error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/subprocess.h"

namespace {

TEST(Dispatch, PullBasedOverMpi) {
  const std::string mpirun = crl::find_on_path("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun on PATH";
  const std::string out = testing::TempDir() + "/dispatch_out.json";
  std::filesystem::remove(out);
  crl::CommandOptions options;
  options.timeout = std::chrono::seconds(120);
  options.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  const auto r = crl::run_command({mpirun, "-np", "3", "--oversubscribe", DISPATCH_WORKER, out}, options);
  ASSERT_TRUE(r.ok()) << r.output;
  std::ifstream in(out);
  ASSERT_TRUE(in) << r.output;
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 13u);
  int slow_rank = -1;
  std::map<int, int> per_rank;
  for (int i = 0; i < 13; ++i) {
    const auto& v = j.at(std::to_string(100 + i));
    ++per_rank[v["rank"].get<int>()];
    if (i == 0) {
      slow_rank = v["rank"];
      EXPECT_EQ(v["message"], "slow");
    } else if (i == 4) {
      EXPECT_NE(v["message"].get<std::string>().find("crl's own broke"), std::string::npos) << v.dump();
      EXPECT_EQ(v["status"], "internal_error");
    } else {
      EXPECT_EQ(v["message"], "fast " + std::to_string(i));
    }
  }
  // While the slow one (1.5 s) ran, the other evaluator (20 ms each) judged all the others.
  EXPECT_EQ(per_rank[slow_rank], 1) << j.dump();
  EXPECT_EQ(per_rank[3 - slow_rank], 12) << j.dump();
}

}  // namespace
