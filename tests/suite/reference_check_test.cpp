// The reference check on fixture suites: degenerate references are caught (identity, near-constant,
// seed-independent), a declared-degenerate chain passes with its findings, a good one is timed by the
// evaluator's timer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "shared_test_cache.h"
#include "eval/evaluator.h"
#include "eval/reference_check.h"

namespace crl::eval {
namespace {

const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/suite";

ReferenceCheckOptions cpu_small() {
  ReferenceCheckOptions o;
  o.scale = "small";
  o.backend = Backend::cpu;
  o.time_budget_seconds = 0.3;
  o.cpu_threads = 1;  // as the evaluator tests: two threads on CI's two loaded cores wait on each other
  o.compiler.cache_dir = crl::testing::shared_test_cache_dir();
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
  // Only references that pass are timed (by the evaluator).
  for (const auto& r : report.results) {
    if (r.ok()) {
      EXPECT_GT(r.median_ms, 0) << r.id;
    } else {
      EXPECT_EQ(r.median_ms, 0) << r.id;
      EXPECT_EQ(r.timed_pairs, 0) << r.id;
    }
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
  // The evaluator's timer measured it: timed pairs (at least its minimum), the reference judged
  // against itself with an interval around its speedup, and the same time per call behind GB/s.
  EXPECT_GE(r.timed_pairs, eval::EvalOptions{}.min_timed_pairs);
  EXPECT_GT(r.median_ms, 0);
  EXPECT_LE(r.self_speedup_ci_low, r.self_speedup);
  EXPECT_GE(r.self_speedup_ci_high, r.self_speedup);
  EXPECT_GT(r.self_speedup, 0);  // how near 1.00: a figure of bench_eval on an idle machine, not of a test
  EXPECT_NEAR(r.gbytes_per_s, r.bytes / (r.median_ms * 1e-3) / 1e9, 1e-9 * r.gbytes_per_s);
  const auto j = to_json(report);
  EXPECT_EQ(j["failures"], 0);
  EXPECT_EQ(j["results"][0]["status"], "ok");
  EXPECT_EQ(j["results"][0]["timed_pairs"], r.timed_pairs);
  EXPECT_EQ(j["results"][0]["self_speedup_ci"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["time_budget_seconds"].get<double>(), 0.3);
}

// --time-budget 0: checked, not timed (the CI gates check every reference without timing them).
TEST(ReferenceCheck, ZeroBudgetChecksWithoutTiming) {
  const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  ReferenceCheckOptions o = cpu_small();
  o.time_budget_seconds = 0;
  const ReferenceCheckReport report = check_references({&suite.find("level1/019_relu")}, o);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, "ok") << report.results[0].message;
  EXPECT_EQ(report.results[0].median_ms, 0);
  EXPECT_EQ(report.results[0].timed_pairs, 0);
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
}  // namespace crl::eval
