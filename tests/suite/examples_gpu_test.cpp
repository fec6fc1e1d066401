// On the GPU: every CUDA example in jobs/examples/level1 matches its task's reference at full scale,
// and its speedup over the reference (median of timed calls, device synchronised) is reported and
// written to $CRL_TEST_OUT_DIR/examples_speedups.json when that variable is set.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "compile/compiler.h"
#include "compile/loaded_program.h"
#include "program/arguments.h"
#include "suite/output_checks.h"
#include "suite/suite.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

double median_ms(const LoadedProgram& program, const std::vector<at::Tensor>& args, int calls) {
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    { const auto out = program.forward(args); torch::cuda::synchronize(); }
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

TEST(ExamplesGpu, CudaCandidatesMatchAtFullScaleAndReportSpeedups) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: the CUDA examples cannot run here";
  const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  CompilerOptions options;
  options.cache_dir = (fs::path(CRL_BINARY_DIR) / "test-cache" / "examples_gpu").string();
  Compiler compiler(options);
  nlohmann::json report = nlohmann::json::array();
  for (const auto& e : fs::directory_iterator(fs::path(CRL_SOURCE_DIR) / "jobs" / "examples" / "level1")) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".cuda.crl")) continue;
    SCOPED_TRACE(name);
    const Task& task = suite.find("level1/" + name.substr(0, name.find('.')));
    CompileRequest cand_req{load_program_file(e.path().string()), task.spec.num_args(), Backend::cuda, ""};
    CompileRequest ref_req{task.program, task.spec.num_args(), Backend::cuda, ""};
    const CompileResult cand = compiler.compile(cand_req), ref = compiler.compile(ref_req);
    ASSERT_TRUE(cand.ok) << cand.log;
    ASSERT_TRUE(ref.ok) << ref.log;
    const LoadedProgram candidate(cand.library_path), reference(ref.library_path);
    const auto args = make_arguments(task.spec, "full", 7, at::Device(at::kCUDA, 0));
    {
      const auto expected = reference.forward(args);
      const auto got = candidate.forward(args);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].sizes(), expected[i].sizes());
        EXPECT_DOUBLE_EQ(fraction_close(got[i], expected[i], task.spec.tolerance_for(expected[i].scalar_type())), 1.0)
            << "output " << i;
      }
    }
    const double ref_ms = median_ms(reference, args, 21), cand_ms = median_ms(candidate, args, 21);
    const double gbytes = task.spec.bytes_at("full") / 1e9;
    std::cout << fmt::format("{:<40} reference {:8.3f} ms  candidate {:8.3f} ms  speedup {:5.2f}x  ({:.0f} GB/s)\n",
                             name, ref_ms, cand_ms, ref_ms / cand_ms, gbytes / (cand_ms * 1e-3));
    report.push_back({{"example", name}, {"task", task.id}, {"reference_ms", ref_ms}, {"candidate_ms", cand_ms},
                      {"speedup", ref_ms / cand_ms}, {"candidate_gbytes_per_s", gbytes / (cand_ms * 1e-3)}});
  }
  EXPECT_GE(report.size(), 4u);
  if (const char* dir = std::getenv("CRL_TEST_OUT_DIR"); dir != nullptr && *dir != '\0') {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "examples_speedups.json") << report.dump(2) << "\n";
  }
}

}  // namespace
}  // namespace crl
