// Hack-guard units: the dynamic-symbol judge, nm on real libraries, the static text scan, and the
// worker environment (no LD_PRELOAD even when the evaluator has one).
#include <gtest/gtest.h>
#include <stdlib.h>

#include "core/error.h"
#include "eval/guard_symbols.h"
#include "eval/static_scan.h"
#include "eval/worker_process.h"

namespace crl::eval {
namespace {

TEST(GuardSymbolsTest, FlagsDefinedTimingAllocationAndCudaSymbols) {
  const auto findings = judge_symbols({"crl_forward", "clock_gettime", "cudaEventElapsedTime", "malloc",
                                       "_ZNSt6chrono3_V212steady_clock3nowEv", "relu", "cuLaunchKernel"},
                                      {});
  std::vector<std::string> names;
  for (const auto& f : findings) names.push_back(f.symbol);
  EXPECT_EQ(names, (std::vector<std::string>{"clock_gettime", "cudaEventElapsedTime", "malloc",
                                             "_ZNSt6chrono3_V212steady_clock3nowEv", "cuLaunchKernel"}));
  for (const auto& f : findings) EXPECT_TRUE(f.defined);
}

TEST(GuardSymbolsTest, FlagsImportedLoaderAndPatchingFunctionsOnly) {
  const auto findings = judge_symbols({}, {"malloc", "cudaLaunchKernel", "dlsym", "mprotect", "ptrace", "memcpy"});
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0].symbol, "dlsym");
  EXPECT_FALSE(findings[0].defined);
  EXPECT_EQ(describe(findings).find("imports dlsym"), 0u);
}

TEST(GuardSymbolsTest, NmReadsARealLibrary) {
  // libc defines clock_gettime and malloc: the scan must see them through nm -D.
  const auto findings = scan_symbols({"/lib/x86_64-linux-gnu/libc.so.6"});
  bool clock = false;
  for (const auto& f : findings) clock |= f.symbol == "clock_gettime" && f.defined;
  EXPECT_TRUE(clock) << describe(findings);
  EXPECT_THROW(scan_symbols({"/nonexistent/lib.so"}), Error);
}

TEST(StaticScanTest, FlagsSuspiciousConstructsWithTheirLines) {
  const std::string text =
      "at::Tensor forward(const at::Tensor& x) {\n"
      "  static at::Tensor cached;\n"
      "  std::thread t([]{});\n"
      "  cudaStream_t s; cudaStreamCreate(&s);\n"
      "  // std::thread in a comment is fine\n"
      "  const char* e = getenv(\"X\");\n"
      "  asm volatile(\"\");\n"
      "  return at::relu(x);\n"
      "}\n";
  const auto findings = static_scan(text);
  std::vector<std::pair<int, std::string>> got;
  for (const auto& f : findings) got.emplace_back(f.line, f.construct);
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(2, std::string("static state (a cache across calls?)"))), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(3, std::string("host thread"))), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(4, std::string("other CUDA stream"))), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(6, std::string("environment"))), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(7, std::string("inline assembly"))), got.end());
  for (const auto& f : findings) EXPECT_NE(f.line, 5) << "comment flagged";
}

TEST(StaticScanTest, PlainKernelIsNotFlagged) {
  const std::string text =
      "static __global__ void k(const float* x, float* y) { y[0] = x[0]; }\n"
      "static constexpr int kBlock = 256;\n"
      "at::Tensor forward(const at::Tensor& x) { return at::relu(x); }\n";
  EXPECT_EQ(describe(static_scan(text)), "nothing suspicious");
}

TEST(WorkerEnvironmentTest, PreloadIsNeverPassedToWorkers) {
  setenv("LD_PRELOAD", "/tmp/evil.so", 1);
  setenv("LD_AUDIT", "/tmp/evil.so", 1);
  const auto env = clean_worker_environment("/tmp/private", "0");
  unsetenv("LD_PRELOAD");
  unsetenv("LD_AUDIT");
  EXPECT_EQ(env.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(env.count("LD_AUDIT"), 0u);
}

// A worker sees one GPU: entry `gpu` of the evaluator's CUDA_VISIBLE_DEVICES (indices, UUIDs),
// the index itself where that is unset, none for the CPU backend; never the evaluator's whole list.
TEST(WorkerEnvironmentTest, AWorkerSeesItsEvaluatorsOneGpu) {
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = before != nullptr ? before : "";
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(worker_visible_gpu(2), "2");
  EXPECT_EQ(worker_visible_gpu(-1), "-1");
  setenv("CUDA_VISIBLE_DEVICES", "3,GPU-8f1c2a7e,5", 1);
  EXPECT_EQ(worker_visible_gpu(0), "3");
  EXPECT_EQ(worker_visible_gpu(1), "GPU-8f1c2a7e");
  EXPECT_THROW(worker_visible_gpu(3), InputError);
  const auto env = clean_worker_environment("/tmp/private", worker_visible_gpu(2));
  if (before != nullptr) {
    setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  } else {
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "5");
}

// The libraries' logging switches reach the workers (what `gpu-measure.sh cudnn` reads); other
// variables of the evaluator's do not.
TEST(WorkerEnvironmentTest, LibraryLoggingSwitchesReachWorkersAndOtherVariablesDoNot) {
  setenv("CUDNN_LOGLEVEL_DBG", "3", 1);
  setenv("CUDNN_LOGDEST_DBG", "/tmp/cudnn.log", 1);
  setenv("CRL_SOME_SECRET", "x", 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const auto env = clean_worker_environment("/tmp/private", "0");
  unsetenv("NCCL_NVLS_ENABLE");
  unsetenv("CUDNN_LOGLEVEL_DBG");
  unsetenv("CUDNN_LOGDEST_DBG");
  unsetenv("CRL_SOME_SECRET");
  ASSERT_EQ(env.count("CUDNN_LOGLEVEL_DBG"), 1u);
  EXPECT_EQ(env.at("CUDNN_LOGLEVEL_DBG"), "3");
  EXPECT_EQ(env.at("CUDNN_LOGDEST_DBG"), "/tmp/cudnn.log");
  EXPECT_EQ(env.count("CRL_SOME_SECRET"), 0u);
  ASSERT_EQ(env.count("NCCL_NVLS_ENABLE"), 1u);  // the host's multicast switch survives the clean environment
  EXPECT_EQ(env.at("NCCL_NVLS_ENABLE"), "0");
  EXPECT_EQ(env.at("HOME"), "/tmp/private");
}

}  // namespace
}  // namespace crl::eval
