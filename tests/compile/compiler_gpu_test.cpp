// GPU test: a compiled two-kernel CUDA candidate runs on the GPU and matches ATen.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "compile/compiler.h"
#include "compile/loaded_program.h"
#include "compile_test_util.h"
#include "compile/cuda_programs.h"
#include "program/arguments.h"
#include "program/format_doc_examples.h"
#include "program/task_spec.h"
#include "core/error.h"

namespace crl {
namespace {

TEST(CompilerGpu, CudaCandidateRunsAndMatchesAten) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  Compiler compiler(testing::test_options());
  // No arch in the request: the local GPU's.
  const CompileResult result =
      compiler.compile(testing::request_for(testing::two_kernel_cuda_program(testing::unique_tag()), 1, Backend::cuda));
  ASSERT_TRUE(result.ok) << result.log;
  const LoadedProgram loaded(result.library_path);
  const at::Tensor x = at::randn({4096, 1024}, at::TensorOptions().device(at::kCUDA));
  const auto out = loaded.forward({x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_cuda());
  EXPECT_TRUE(at::allclose(out[0], at::relu(x) * 2 + 1));
  // The program's TORCH_CHECK comes back as an error, not a crash.
  EXPECT_THROW(loaded.forward({x.cpu()}), Error);
}

TEST(CompilerGpu, DirectCublasCallRuns) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  Compiler compiler(testing::test_options());
  const CompileResult result =
      compiler.compile(testing::request_for(testing::cublas_program(testing::unique_tag()), 2, Backend::cuda));
  ASSERT_TRUE(result.ok) << result.log;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor x = at::randn({100000}, cuda), y0 = at::randn({100000}, cuda);
  const auto out = LoadedProgram(result.library_path).forward({x, y0});
  const at::Tensor expected = 3 * x + y0;
  EXPECT_TRUE(at::allclose(out[0], expected, 1e-5, 1e-5))
      << "max |error| " << (out[0] - expected).abs().max().item<float>() << ", first values " << out[0].narrow(0, 0, 4)
      << " expected " << expected.narrow(0, 0, 4);
}

TEST(CompilerGpu, FormatDocReferenceAndCandidateAgreeOnTheGpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  Compiler compiler(testing::test_options());
  const ProgramText reference = parse_program_text(testing::format_doc_example("A reference:"), "reference");
  const TaskSpec spec = parse_task_spec(reference.spec, reference.origin);
  const CompileResult ref = compiler.compile({reference, spec.num_args(), Backend::cuda, ""});
  const CompileResult cand = compiler.compile(
      {parse_program_text(testing::format_doc_example("A CUDA candidate for it:"), "candidate"), spec.num_args(),
       Backend::cuda, ""});
  ASSERT_TRUE(ref.ok) << ref.log;
  ASSERT_TRUE(cand.ok) << cand.log;
  const auto args = make_arguments(spec, "full", 1, at::Device(at::kCUDA, 0));
  const auto expected = LoadedProgram(ref.library_path).forward(args);
  const auto got = LoadedProgram(cand.library_path).forward(args);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(at::equal(got[0], expected[0]));
}

}  // namespace
}  // namespace crl
