// clang's CUDA mode for load_inline's cuda.cu (clang_cuda.h): nvcc's flags translated or refused,
// and the driver's jobs rewritten for the precompiled headers and CUDA 13's fatbinary.
#include "compile/clang_cuda.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace crl {
namespace {

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(ClangCuda, FastMathSelectsTheApproximateHeaderAndDeviceCodeGeneration) {
  std::string why;
  const auto plain = clang_cuda_flags({"-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", "-arch=sm_90"}, &why);
  ASSERT_TRUE(plain.has_value()) << why;
  EXPECT_FALSE(plain->approx_transcendentals);
  EXPECT_TRUE(plain->device_cc1.empty());
  EXPECT_TRUE(plain->ptxas.empty());

  const auto fast = clang_cuda_flags({"-O3", "--use_fast_math"}, &why);
  ASSERT_TRUE(fast.has_value()) << why;
  EXPECT_TRUE(fast->approx_transcendentals);
  EXPECT_TRUE(has(fast->device_cc1, "-fdenormal-fp-math-f32=preserve-sign,preserve-sign"));
  EXPECT_TRUE(has(fast->device_cc1, "-nvptx-prec-divf32=1"));
  EXPECT_TRUE(has(fast->device_cc1, "-nvptx-prec-sqrtf32=0"));

  // nvcc's separate switches: code generation only, the exact header.
  const auto separate = clang_cuda_flags({"--ftz=true", "-prec-div=false", "--fmad=false"}, &why);
  ASSERT_TRUE(separate.has_value()) << why;
  EXPECT_FALSE(separate->approx_transcendentals);
  EXPECT_TRUE(has(separate->device_cc1, "-ffp-contract=off"));
  EXPECT_FALSE(has(separate->device_cc1, "-nvptx-prec-sqrtf32=0"));
}

TEST(ClangCuda, PtxasValuesAndDefinesPassThrough) {
  std::string why;
  const auto flags = clang_cuda_flags({"-Xptxas", "-O3,-v", "--ptxas-options=-dlcm=ca", "--maxrregcount=48", "-DTILE=32", "-UNDEBUG"}, &why);
  ASSERT_TRUE(flags.has_value()) << why;
  EXPECT_EQ(flags->ptxas, (std::vector<std::string>{"-O3", "-v", "-dlcm=ca", "--maxrregcount", "48"}));
  EXPECT_EQ(flags->driver, (std::vector<std::string>{"-DTILE=32", "-UNDEBUG"}));
}

TEST(ClangCuda, AFlagWithoutCounterpartLeavesTheExtensionToNvcc) {
  for (const std::string flag : {"-std=c++20", "-fno-strict-aliasing", "-g", "-Wall", "-mcpu=x"}) {
    std::string why;
    EXPECT_FALSE(clang_cuda_flags({"-O3", flag}, &why).has_value()) << flag;
    EXPECT_NE(why.find(flag), std::string::npos) << why;
  }
}

// A `clang++ -###` listing of a CUDA compile, as clang 19 prints it (arguments shortened).
const char* const kListing =
    "Debian clang version 19.1.7 (3~deb12u1)\n"
    "Target: x86_64-pc-linux-gnu\n"
    "InstalledDir: /usr/lib/llvm-19/bin\n"
    " \"/usr/lib/llvm-19/bin/clang\" \"-cc1\" \"-triple\" \"nvptx64-nvidia-cuda\" \"-fcuda-is-device\" \"-S\" \"-O3\" "
    "\"-ffp-contract=fast\" \"-D\" \"Q=\\\"a b\\\"\" \"-o\" \"/b/cuda-sm_90a.s\" \"-x\" \"cuda\" \"/b/cuda.cu\"\n"
    " \"/usr/local/cuda/bin/ptxas\" \"-m64\" \"-O3\" \"--gpu-name\" \"sm_90a\" \"--output-file\" \"/b/cuda-sm_90a.o\" \"/b/cuda-sm_90a.s\"\n"
    " \"/usr/local/cuda/bin/fatbinary\" \"-64\" \"--create\" \"/b/cuda.fatbin\" \"--image=profile=sm_90a,file=/b/cuda-sm_90a.o\" "
    "\"--image=profile=compute_90a,file=/b/cuda-sm_90a.s\"\n"
    " \"/usr/lib/llvm-19/bin/clang\" \"-cc1\" \"-triple\" \"x86_64-pc-linux-gnu\" \"-emit-obj\" \"-fcuda-include-gpubinary\" "
    "\"/b/cuda.fatbin\" \"-o\" \"/b/device.o\" \"-x\" \"cuda\" \"/b/cuda.cu\"\n";

TEST(ClangCuda, DriverListingParsesIntoJobsWithQuotesUnescaped) {
  const auto jobs = parse_driver_jobs(kListing);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_TRUE(is_device_cc1(jobs[0]));
  EXPECT_TRUE(has(jobs[0], "Q=\"a b\""));
  EXPECT_EQ(jobs[1][0], "/usr/local/cuda/bin/ptxas");
  EXPECT_TRUE(is_cc1(jobs[3]));
  EXPECT_FALSE(is_device_cc1(jobs[3]));
}

TEST(ClangCuda, ThePreludesJobsWriteOnePrecompiledHeaderPerSide) {
  const auto jobs = pch_emitting_jobs(parse_driver_jobs(kListing), "/p/device.pch", "/p/host.pch");
  ASSERT_EQ(jobs.size(), 2u);  // no ptxas, no fatbinary
  for (const auto& job : jobs) {
    EXPECT_EQ(job[2], "-emit-pch");
    EXPECT_TRUE(has(job, "-fpch-instantiate-templates"));
    EXPECT_FALSE(has(job, "-S"));
    EXPECT_FALSE(has(job, "-emit-obj"));
    EXPECT_FALSE(has(job, "-fcuda-include-gpubinary"));
  }
  EXPECT_TRUE(has(jobs[0], "/p/device.pch"));
  EXPECT_TRUE(has(jobs[1], "/p/host.pch"));
  EXPECT_FALSE(has(jobs[1], "/b/cuda.fatbin"));
}

TEST(ClangCuda, CompileJobsReadEachSidesHeaderAndTheCandidatesFlags) {
  std::string why;
  const auto flags = clang_cuda_flags({"--fmad=false", "-Xptxas=-O2,-v"}, &why);
  ASSERT_TRUE(flags.has_value()) << why;
  const auto jobs = jobs_with_pch(parse_driver_jobs(kListing), "/p/device.pch", "/p/host.pch", *flags, 13);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0][2], "-include-pch");
  EXPECT_EQ(jobs[0][3], "/p/device.pch");
  EXPECT_EQ(jobs[3][3], "/p/host.pch");
  // The candidate's fmad choice comes after the driver's own -ffp-contract, so it wins.
  const auto own = std::find(jobs[0].begin(), jobs[0].end(), "-ffp-contract=off");
  const auto drivers = std::find(jobs[0].begin(), jobs[0].end(), "-ffp-contract=fast");
  ASSERT_NE(own, jobs[0].end());
  EXPECT_GT(own, drivers);
  EXPECT_FALSE(has(jobs[3], "-ffp-contract=off"));  // device code generation only
  // ptxas: the candidate's level replaces the driver's; its input stays last.
  EXPECT_TRUE(has(jobs[1], "-O2"));
  EXPECT_FALSE(has(jobs[1], "-O3"));
  EXPECT_TRUE(has(jobs[1], "-v"));
  EXPECT_EQ(jobs[1].back(), "/b/cuda-sm_90a.s");
  // CUDA 13's fatbinary arguments; CUDA 12's stay.
  EXPECT_TRUE(has(jobs[2], "--image3=kind=elf,sm=90a,file=/b/cuda-sm_90a.o"));
  EXPECT_TRUE(has(jobs[2], "--image3=kind=ptx,sm=90a,file=/b/cuda-sm_90a.s"));
  const auto cuda12 = jobs_with_pch(parse_driver_jobs(kListing), "/p/device.pch", "/p/host.pch", *flags, 12);
  EXPECT_TRUE(has(cuda12[2], "--image=profile=sm_90a,file=/b/cuda-sm_90a.o"));
}

}  // namespace
}  // namespace crl
