// The hand-written candidates in jobs/examples/level1: CPU ones compile and match their task's
// reference on small-scale inputs from two seeds; CUDA ones compile here (nvcc), and on a GPU they
// match the reference at full scale and report their speedup (label gpu, examples_gpu_test).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "compile/compiler.h"
#include "compile/loaded_program.h"
#include "program/arguments.h"
#include "shared_test_cache.h"
#include "suite/output_checks.h"
#include "suite/suite.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
const fs::path kExamples = fs::path(CRL_SOURCE_DIR) / "jobs" / "examples" / "level1";

const Suite& suite() {
  static const Suite s = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  return s;
}

// Example files for a backend ("cpu" or "cuda"): <NNN>_<name>.<backend>.crl.
std::vector<fs::path> examples(const std::string& backend) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kExamples)) {
    const std::string name = e.path().filename().string();
    if (name.size() > backend.size() + 5 && name.ends_with("." + backend + ".crl")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const Task& task_of(const fs::path& example) {
  const std::string name = example.filename().string();
  return suite().find("level1/" + name.substr(0, name.find('.')));
}

CompilerOptions test_compiler() {
  CompilerOptions o;
  o.cache_dir = crl::testing::shared_test_cache_dir();
  return o;
}

std::string compile_or_fail(Compiler& compiler, const ProgramText& program, size_t num_args, Backend backend) {
  CompileRequest request;
  request.program = program;
  request.num_args = num_args;
  request.backend = backend;
  const CompileResult r = compiler.compile(request);
  EXPECT_TRUE(r.ok) << program.origin << ":\n" << r.log;
  return r.ok ? r.library_path : "";
}

TEST(Examples, EveryExampleNamesALevel1Task) {
  const auto cpu = examples("cpu"), cuda = examples("cuda");
  EXPECT_GE(cpu.size(), 3u);
  EXPECT_GE(cuda.size(), 4u);
  for (const auto& e : cpu) EXPECT_NO_THROW(task_of(e)) << e;
  for (const auto& e : cuda) EXPECT_NO_THROW(task_of(e)) << e;
}

TEST(Examples, CpuCandidatesMatchTheirReferenceOnTwoSeeds) {
  Compiler compiler(test_compiler());
  for (const auto& path : examples("cpu")) {
    SCOPED_TRACE(path.string());
    const Task& task = task_of(path);
    const std::string candidate_lib = compile_or_fail(compiler, load_program_file(path.string()), task.spec.num_args(), Backend::cpu);
    const std::string reference_lib = compile_or_fail(compiler, task.program, task.spec.num_args(), Backend::cpu);
    if (candidate_lib.empty() || reference_lib.empty()) continue;
    const LoadedProgram candidate(candidate_lib), reference(reference_lib);
    for (uint64_t seed : {11u, 12u}) {
      const auto args = make_arguments(task.spec, "small", seed, at::Device(at::kCPU));
      const auto expected = reference.forward(args);
      const auto got = candidate.forward(args);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].sizes(), expected[i].sizes());
        ASSERT_EQ(got[i].scalar_type(), expected[i].scalar_type());
        EXPECT_DOUBLE_EQ(fraction_close(got[i], expected[i], task.spec.tolerance_for(expected[i].scalar_type())), 1.0)
            << "output " << i << " seed " << seed;
      }
    }
  }
}

TEST(Examples, CudaCandidatesCompileWithNvcc) {
#ifndef CRL_HAVE_CUDA
  GTEST_SKIP() << "this build has no nvcc (CUDA parts off), so CUDA candidates cannot be compiled";
#else
  Compiler compiler(test_compiler());
  for (const auto& path : examples("cuda")) {
    SCOPED_TRACE(path.string());
    compile_or_fail(compiler, load_program_file(path.string()), task_of(path).spec.num_args(), Backend::cuda);
  }
#endif
}

}  // namespace
}  // namespace crl
