// On the GPU: every CUDA example in jobs/examples/level1 is judged by the evaluator at full scale,
// as a candidate of the job would be (the one timer of crl: its judge and timing workers): each must
// be ok, and its speedup with its interval is reported and written to
// $CRL_TEST_OUT_DIR/examples_speedups.json when that variable is set.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "compile/compiler.h"
#include "eval/evaluator.h"
#include "shared_test_cache.h"
#include "suite/suite.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

TEST(ExamplesGpu, CudaCandidatesAreJudgedOkAtFullScaleAndReportSpeedups) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: the CUDA examples cannot run here";
  const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  CompilerOptions options;
  options.cache_dir = crl::testing::shared_test_cache_dir();
  Compiler compiler(options);
  eval::EvalOptions eval_options;
  eval_options.backend = Backend::cuda;
  eval_options.scale = "full";
  eval_options.time_budget_seconds = 2;
  eval::Evaluator evaluator(eval_options, compiler);
  nlohmann::json report = nlohmann::json::array();
  for (const auto& e : fs::directory_iterator(fs::path(CRL_SOURCE_DIR) / "jobs" / "examples" / "level1")) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".cuda.crl")) continue;
    SCOPED_TRACE(name);
    const Task& task = suite.find("level1/" + name.substr(0, name.find('.')));
    const eval::Verdict v = evaluator.evaluate(task, load_program_file(e.path().string()), name);
    ASSERT_TRUE(v.ok()) << v.status_text() << ": " << v.message;
    const double ref_ms = v.reference_time.median_us / 1e3, cand_ms = v.candidate_time.median_us / 1e3;
    const double gbytes = task.spec.bytes_at("full") / 1e9;
    std::cout << fmt::format("{:<40} reference {:8.3f} ms  candidate {:8.3f} ms  speedup {:5.2f}x ({:.2f}..{:.2f})  ({:.0f} GB/s)\n",
                             name, ref_ms, cand_ms, v.speedup, v.speedup_ci_low, v.speedup_ci_high, gbytes / (cand_ms * 1e-3));
    report.push_back({{"example", name}, {"task", task.id}, {"reference_ms", ref_ms}, {"candidate_ms", cand_ms},
                      {"speedup", v.speedup}, {"speedup_ci", {v.speedup_ci_low, v.speedup_ci_high}},
                      {"candidate_gbytes_per_s", gbytes / (cand_ms * 1e-3)}});
  }
  EXPECT_GE(report.size(), 4u);
  if (const char* dir = std::getenv("CRL_TEST_OUT_DIR"); dir != nullptr && *dir != '\0') {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "examples_speedups.json") << report.dump(2) << "\n";
  }
}

}  // namespace
}  // namespace crl
