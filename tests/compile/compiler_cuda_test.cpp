// Tests of the CUDA backend that need nvcc but no GPU: a CUDA candidate compiles to a loadable .so,
// device-code errors name the .crl line, and nvcc reads nothing outside the toolchain; load_inline's
// CUDA sources build with clang's CUDA mode where there is a clang 19, else (or when clang fails) nvcc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

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

// The relu extension with a fresh tag, for sm_90a.
ExtensionRequest cuda_extension(const std::string& extra) {
  ExtensionRequest r = testing::relu_cuda_extension(unique_tag(), extra);
  r.cuda_arch = "sm_90a";
  return r;
}

// Whether the object's .comment names clang (nvcc's host side is g++: "GCC: ...").
bool built_by_clang(const CompileResult& r) {
  for (const auto& path : r.object_paths) {
    if (std::filesystem::path(path).filename() != "device.o") continue;
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return bytes.find("clang version") != std::string::npos;
  }
  ADD_FAILURE() << "no device.o among the result's objects";
  return false;
}

// Skips unless this machine has nvcc, Python's headers and a clang 19 for CUDA sources.
#define SKIP_WITHOUT_CLANG_CUDA(compiler)                                                                        \
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH";                                        \
  if ((compiler).cuda_clang().empty())                                                                            \
    GTEST_SKIP() << "no clang++ 19 or later here (tools/setup.sh installs clang-19 where it is packaged): nvcc alone builds load_inline's CUDA"

TEST(CompilerCuda, LoadInlineCudaBuildsWithClangsPrecompiledHeaders) {
  Compiler compiler(testing::test_options());
  SKIP_WITHOUT_CLANG_CUDA(compiler);
  const CompileResult r = compiler.compile_extension(cuda_extension(""));
  if (!r.ok && r.stage == "request") GTEST_SKIP() << r.log;  // a crl without Python's headers
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_EQ(r.log.find("nvcc did"), std::string::npos) << r.log;
  EXPECT_TRUE(built_by_clang(r));
  EXPECT_TRUE(std::filesystem::exists(r.library_path));
  EXPECT_TRUE(compiler.compile_extension(cuda_extension("")).ok);  // (another tag: the warm header's case)
}

// A source that needs torch's C++ frontend (beyond the lighter torch/extension.h clang tries first)
// builds with clang and torch's own header; one only nvcc accepts builds with nvcc, as torch's
// load_inline would: clang's failures are not the candidate's.
TEST(CompilerCuda, WhatClangCannotBuildNvccBuilds) {
  if (std::getenv("CRL_TEST_SLOW") == nullptr) {
    GTEST_SKIP() << "nvcc's parse of torch's headers takes ~40 s of CPU: ctest -L slow runs it (compile_cuda_fallback, CRL_TEST_SLOW=1)";
  }
  Compiler compiler(testing::test_options());
  SKIP_WITHOUT_CLANG_CUDA(compiler);
  const CompileResult frontend = compiler.compile_extension(cuda_extension(
      "torch::Tensor relu_by_the_frontend(torch::Tensor x) { return torch::nn::functional::relu(x); }\n"));
  if (!frontend.ok && frontend.stage == "request") GTEST_SKIP() << frontend.log;
  ASSERT_TRUE(frontend.ok) << frontend.log;
  EXPECT_EQ(frontend.log.find("nvcc did"), std::string::npos) << frontend.log;
  EXPECT_TRUE(built_by_clang(frontend));

  const CompileResult r = compiler.compile_extension(cuda_extension("#ifndef __NVCC__\n#error this source is for nvcc only\n#endif\n"));
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_NE(r.log.find("clang's CUDA mode did not build cuda.cu; nvcc did"), std::string::npos) << r.log;
  EXPECT_FALSE(built_by_clang(r));
}

// Through clang or nvcc, the sandbox holds: a header named by a macro is not read into the log.
TEST(CompilerCuda, LoadInlineCudaCannotIncludeAFileOutsideTheToolchain) {
  if (landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock: compiles run without their sandbox here";
  Compiler compiler(testing::test_options());
  SKIP_WITHOUT_CLANG_CUDA(compiler);
  const std::string secret = "/tmp/crl-extension-include-attack-" + unique_tag();
  { std::ofstream(secret) << "the secret text\n"; }
  const CompileResult r = compiler.compile_extension(cuda_extension("#define CRL_SECRET \"" + secret + "\"\n#include CRL_SECRET\n"));
  std::filesystem::remove(secret);
  if (!r.ok && r.stage == "request" && r.log.find("Python") != std::string::npos) GTEST_SKIP() << r.log;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.stage, "device") << r.log;
  EXPECT_EQ(r.log.find("the secret text"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace crl
