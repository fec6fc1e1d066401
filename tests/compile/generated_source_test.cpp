// Tests of the generated translation units: #line directives, glue arity, device includes.
#include <gtest/gtest.h>

#include "compile/generated_source.h"

namespace crl {
namespace {

TEST(GeneratedSource, HostSourceMapsLinesAndCallsForwardWithTheTaskArity) {
  const ProgramText p = parse_program_text("// crl:spec\na: 1\n// crl:host\nat::Tensor forward();\n", "dir/x.crl");
  const std::string host = host_source(p, 3, "abi-v");
  EXPECT_NE(host.find("#line 4 \"dir/x.crl\"\nat::Tensor forward();\n"), std::string::npos) << host;
  EXPECT_NE(host.find("std::make_index_sequence<3>"), std::string::npos);
  EXPECT_NE(host.find("nargs != 3"), std::string::npos);
  EXPECT_NE(host.find("return \"abi-v\";"), std::string::npos);
  EXPECT_EQ(host.find("a: 1"), std::string::npos);  // the spec is not compiled
}

TEST(GeneratedSource, DeviceSourceHasTheBackendsIncludes) {
  const ProgramText p = parse_program_text("// crl:host\nf\n// crl:device\n__global__ void k() {}\n", "y.crl");
  const std::string cuda = device_source(p, Backend::cuda);
  EXPECT_NE(cuda.find("#include <cuda_runtime.h>"), std::string::npos);
  EXPECT_EQ(cuda.find("#include <cuda_bf16.h>"), std::string::npos);  // names no half type: compiles without
  EXPECT_NE(cuda.find("#line 4 \"y.crl\"\n__global__ void k() {}\n"), std::string::npos);
  EXPECT_EQ(cuda.find("ATen"), std::string::npos);  // no LibTorch headers in device code
  EXPECT_NE(device_source(p, Backend::cpu).find("#include <omp.h>"), std::string::npos);
  EXPECT_EQ(device_source(parse_program_text("// crl:host\nf\n// crl:device\n\n", "z"), Backend::cuda), "");
  EXPECT_EQ(device_source(parse_program_text("// crl:host\nf\n", "z"), Backend::cpu), "");
}

TEST(GeneratedSource, HalfPrecisionHeadersComeWithAnySectionThatNamesTheirTypes) {
  for (const char* body : {"__global__ void k(__half* x) {}", "__global__ void k(__nv_bfloat162* x) {}",
                           "__global__ void k(float* x) { x[0] = __half2float(__float2half(x[0])); }",
                           "__global__ void k(void* x) { auto h = __hadd(a, b); }"}) {
    const auto p = parse_program_text(std::string("// crl:host\nf\n// crl:device\n") + body + "\n", "h.crl");
    const std::string cuda = device_source(p, Backend::cuda);
    EXPECT_NE(cuda.find("#include <cuda_fp16.h>\n#include <cuda_bf16.h>"), std::string::npos) << body;
  }
  EXPECT_FALSE(names_half_precision("__global__ void k(float* x, int64_t n) { x[0] = tanhf(x[0]); }"));
}

TEST(GeneratedSource, LineDirectiveEscapesTheOrigin) {
  EXPECT_EQ(line_directive(7, "a\"b\\c"), "#line 7 \"a\\\"b\\\\c\"\n");
}

TEST(GeneratedSource, PreludeIncludesCudaOnlyOnTheCudaBackend) {
  EXPECT_NE(prelude_header_source(Backend::cuda).find("ATen/cuda/CUDAContext.h"), std::string::npos);
  EXPECT_EQ(prelude_header_source(Backend::cpu).find("cuda"), std::string::npos);
}

}  // namespace
}  // namespace crl
