// The default job's CUDA seed programs (jobs/data/seed/cuda.jsonl) compile with nvcc for their
// task's arity. They cannot run without a GPU: on one, `crl data validate jobs/data/seed/cuda.jsonl
// --backend cuda` checks and times them. CI compiles a fixed sample (one program per family, the
// first of each kind of task); SeedCuda.AllCompile (label slow) compiles every one.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "compile/compiler.h"
#include "rl/sft_data.h"
#include "shared_test_cache.h"
#include "suite/suite.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
const fs::path kSeed = fs::path(CRL_SOURCE_DIR) / "jobs" / "data" / "seed" / "cuda.jsonl";

const Suite& suite() {
  static const Suite s = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  return s;
}

// The sample: one CUDA program of each family (an element-wise map, a reduction, a loss, a GEMM
// epilogue, a model).
const std::set<std::string> kSample = {"019_relu.cuda", "047_sum_reduction.cuda", "094_mse_loss.cuda",
                                       "014_gemm_divide_sum_scaling.cuda", "001_mlp.cuda"};

void compile_seed(bool sample_only) {
#ifndef CRL_HAVE_CUDA
  GTEST_SKIP() << "this build has no nvcc (CUDA parts off), so the CUDA seed programs cannot be compiled";
#else
  CompilerOptions options;
  options.cache_dir = crl::testing::shared_test_cache_dir();
  Compiler compiler(options);
  const auto examples = rl::read_sft_jsonl(kSeed.string());
  std::set<std::string> tasks;
  for (const auto& e : examples) tasks.insert(e.task);
  ASSERT_GE(tasks.size(), 30u) << "the CUDA seed data should cover at least 30 tasks";
  size_t compiled = 0;
  std::vector<std::future<CompileResult>> pending;
  std::vector<std::string> ids;
  for (const auto& e : examples) {
    if (sample_only && kSample.count(e.id) == 0) continue;
    const Task& task = suite().find(e.task);
    CompileRequest request;
    request.program = parse_program_text(e.program, kSeed.string() + ":" + std::to_string(e.line));
    request.num_args = task.spec.num_args();
    request.backend = Backend::cuda;
    pending.push_back(compiler.submit(std::move(request)));
    ids.push_back(e.id);
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    const CompileResult r = pending[i].get();
    EXPECT_TRUE(r.ok) << ids[i] << " (" << r.stage << "):\n" << r.log;
    compiled += r.ok ? 1 : 0;
  }
  EXPECT_EQ(compiled, sample_only ? kSample.size() : examples.size());
#endif
}

TEST(SeedCuda, SampleCompiles) { compile_seed(true); }
TEST(SeedCuda, AllCompile) { compile_seed(false); }

}  // namespace
}  // namespace crl
