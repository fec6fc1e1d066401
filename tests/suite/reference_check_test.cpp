// The reference check on fixture suites: degenerate references are caught (identity, near-constant,
// seed-independent), a declared-degenerate chain passes with its findings, a good one is timed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "suite/reference_check.h"

namespace crl {
namespace {

const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/suite";

ReferenceCheckOptions cpu_small() {
  ReferenceCheckOptions o;
  o.scale = "small";
  o.backend = Backend::cpu;
  o.timed_calls = 3;
  // A private cache, so this test never races another build's cache and measures a real compile.
  o.compiler.cache_dir = (std::filesystem::path(CRL_BINARY_DIR) / "test-cache" / "suite_check").string();
  return o;
}

const ReferenceCheckResult& result_for(const ReferenceCheckReport& report, const std::string& id) {
  for (const auto& r : report.results) {
    if (r.id == id) return r;
  }
  throw std::runtime_error("no result for " + id);
}

TEST(ReferenceCheck, CatchesDegenerateFixturesAndAcceptsDeclaredOnes) {
  const Suite suite = Suite::load(kFixtures + "/degenerate");
  std::vector<const Task*> tasks;
  for (const auto& t : suite.tasks()) tasks.push_back(&t);
  const ReferenceCheckReport report = check_references(tasks, cpu_small());
  ASSERT_EQ(report.results.size(), 4u);

  const auto& relu = result_for(report, "level1/019_relu_on_rand");
  EXPECT_EQ(relu.status, "degenerate") << relu.message;
  ASSERT_FALSE(relu.findings.empty());
  EXPECT_EQ(relu.findings[0].kind, "equals_input");

  const auto& cumprod = result_for(report, "level1/090_cumprod_on_rand");
  EXPECT_EQ(cumprod.status, "degenerate") << cumprod.message;
  EXPECT_EQ(cumprod.findings[0].kind, "constant");

  const auto& mse = result_for(report, "level1/094_mse_of_constants");
  EXPECT_EQ(mse.status, "degenerate") << mse.message;
  EXPECT_EQ(mse.findings[0].kind, "seed_independent");

  const auto& declared = result_for(report, "level2/001_declared_constant");
  EXPECT_EQ(declared.status, "ok") << declared.message;
  EXPECT_TRUE(declared.degenerate_declared);
  EXPECT_FALSE(declared.findings.empty());

  EXPECT_EQ(report.failures(), 3u);
  for (const auto& r : report.results) {
    EXPECT_EQ(r.times_ms.size(), 3u) << r.id;
    EXPECT_GT(r.median_ms, 0) << r.id;
  }
}

TEST(ReferenceCheck, GoodReferenceIsOkDeterministicAndTimedWithThroughput) {
  const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  const Task& relu = suite.find("level1/019_relu");
  const ReferenceCheckReport report = check_references({&relu}, cpu_small());
  ASSERT_EQ(report.results.size(), 1u);
  const auto& r = report.results[0];
  EXPECT_EQ(r.status, "ok") << r.message;
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.output_shapes, (std::vector<std::vector<int64_t>>{{16, 16384}}));
  EXPECT_EQ(r.output_dtypes, (std::vector<std::string>{"float32"}));
  EXPECT_GT(r.gbytes_per_s, 0);
  EXPECT_DOUBLE_EQ(r.bytes, 8.0 * 16 * 16384);
  const auto j = to_json(report);
  EXPECT_EQ(j["failures"], 0);
  EXPECT_EQ(j["results"][0]["status"], "ok");
}

TEST(ReferenceCheck, ReferenceThatThrowsIsARuntimeError) {
  const std::string dir = (std::filesystem::path(CRL_BINARY_DIR) / "test-suites" / "throwing").string();
  std::filesystem::create_directories(dir + "/level1");
  {
    std::ofstream f(dir + "/level1/001_throws.crl");
    f << "// crl:spec\ntask: level1/001_throws\ncategory: matmul\n"
         "inputs:\n  - {name: A, shape: [n, n], dtype: float32, init: rand}\n"
         "scales:\n  small: {n: 4}\nflops: n\nbytes: n\n"
         "// crl:host\nat::Tensor forward(const at::Tensor& A) { return at::matmul(A, A.t().narrow(0, 0, 3)); }\n";
  }
  const Suite suite = Suite::load(dir);
  const ReferenceCheckReport report = check_references({&suite.tasks()[0]}, cpu_small());
  EXPECT_EQ(report.results[0].status, "runtime_error");
  EXPECT_NE(report.results[0].message.find("forward failed"), std::string::npos) << report.results[0].message;
}

}  // namespace
}  // namespace crl
