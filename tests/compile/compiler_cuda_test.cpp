// Tests of the CUDA backend that need nvcc but no GPU: a CUDA candidate compiles to a loadable .so,
// device-code errors name the .crl line, and nvcc reads nothing outside the toolchain.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compile/compiler.h"
#include "compile/loaded_program.h"
#include "compile_test_util.h"
#include "core/landlock.h"
#include "core/subprocess.h"
#include "compile/cuda_programs.h"
#include "program/format_doc_examples.h"

namespace crl {
namespace {

using testing::request_for;
using testing::unique_tag;

TEST(CompilerCuda, CandidateCompilesToALoadableLibrary) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";
  Compiler compiler(testing::test_options());
  CompileRequest request = request_for(testing::two_kernel_cuda_program(unique_tag()), 1, Backend::cuda);
  request.cuda_arch = "sm_90a";
  const CompileResult result = compiler.compile(request);
  ASSERT_TRUE(result.ok) << result.log;
  EXPECT_FALSE(result.cache_hit);
  EXPECT_TRUE(std::filesystem::exists(result.library_path));
  // The library resolves at dlopen even without a GPU (CUDA initialises lazily).
  const LoadedProgram loaded(result.library_path);
  EXPECT_EQ(loaded.abi_version(), program_abi_version());
  // Another arch is another library.
  request.cuda_arch = "sm_80";
  EXPECT_NE(compiler.key_of(request), result.key);
}

// nvcc runs in the compile sandbox too: a device section that names a file through a macro fails
// without the file's text in its log (the CPU test tries the other ways around the textual check).
TEST(CompilerCuda, ADeviceSectionCannotIncludeAFileOutsideTheToolchain) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";
  if (landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock: compiles run without their sandbox here";
  const std::string secret = "/tmp/crl-device-include-attack-" + unique_tag();
  { std::ofstream(secret) << "the secret text\n"; }
  Compiler compiler(testing::test_options());
  CompileRequest request = request_for("// crl:device\n#define CRL_SECRET \"" + secret +
                                           "\"\n#include CRL_SECRET\n// crl:host\nat::Tensor forward(const at::Tensor& x) { return x; }\n",
                                       1, Backend::cuda, "attack.crl");
  request.cuda_arch = "sm_90a";
  const CompileResult r = compiler.compile(request);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.stage, "device") << r.log;
  EXPECT_EQ(r.log.find("the secret text"), std::string::npos) << r.log;
  std::filesystem::remove(secret);
}

TEST(CompilerCuda, DeviceErrorsNameTheCrlLine) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";
  Compiler compiler(testing::test_options());
  const std::string text =
      "// crl:device\n"                                                  // 1
      "__global__ void k(float* y) {\n"                                  // 2
      "  y[threadIdx.x] = not_declared;\n"                               // 3
      "}\n"                                                              // 4
      "// crl:host\n"
      "// " + unique_tag() + "\n"
      "at::Tensor forward(const at::Tensor& x) { return x.clone(); }\n";
  CompileRequest request = request_for(text, 1, Backend::cuda, "kern.crl");
  request.cuda_arch = "sm_90a";
  const CompileResult result = compiler.compile(request);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.stage, "device");
  EXPECT_NE(result.log.find("kern.crl(3)"), std::string::npos) << result.log;
}

TEST(CompilerCuda, DirectCublasCallsLink) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";
  Compiler compiler(testing::test_options());
  CompileRequest request = request_for(testing::cublas_program(unique_tag()), 2, Backend::cuda);
  request.cuda_arch = "sm_90a";
  const CompileResult result = compiler.compile(request);
  ASSERT_TRUE(result.ok) << result.log;
  EXPECT_NO_THROW(LoadedProgram{result.library_path});
}

TEST(CompilerCuda, FormatDocCandidateCompiles) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";
  Compiler compiler(testing::test_options());
  CompileRequest request = request_for(testing::format_doc_example("A CUDA candidate for it:"), 1, Backend::cuda,
                                       "program-format.md");
  request.cuda_arch = "sm_90a";
  const CompileResult result = compiler.compile(request);
  EXPECT_TRUE(result.ok) << result.log;
}

}  // namespace
}  // namespace crl
