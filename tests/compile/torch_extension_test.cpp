// The load_inline extension's files and which flags a candidate may pass (torch_extension.h).
#include "compile/torch_extension.h"

#include <gtest/gtest.h>

namespace crl {
namespace {

ExtensionRequest relu_request() {
  ExtensionRequest r;
  r.origin = "cand.py";
  r.name = "relu_ext";
  r.cpp_source = "torch::Tensor relu(torch::Tensor x);";
  r.functions = {"relu"};
  return r;
}

TEST(TorchExtension, MainSourceIsLoadInlinesWithItsBindings) {
  const std::string main = extension_main_source(relu_request());
  EXPECT_EQ(main.rfind("#define TORCH_EXTENSION_NAME relu_ext\n#include <torch/extension.h>\ntorch::Tensor relu(torch::Tensor x);", 0), 0u)
      << main;
  EXPECT_NE(main.find("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def(\"relu\", torch::wrap_pybind_function(relu), \"relu\");\n}"),
            std::string::npos)
      << main;
  ExtensionRequest own = relu_request();
  own.bindings = false;  // load_inline without functions: the sources bind their own module
  EXPECT_EQ(extension_main_source(own).find("PYBIND11_MODULE"), std::string::npos);
  EXPECT_EQ(extension_cuda_source(own), "");
  own.cuda_source = "__global__ void k() {}";
  EXPECT_EQ(extension_cuda_source(own), "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n__global__ void k() {}\n");
}

TEST(TorchExtension, FlagsThatChangeCodeGenerationPass) {
  ExtensionRequest r = relu_request();
  r.cuda = true;
  r.extra_cflags = {"-O3", "-std=c++17", "-DUSE_FAST=1", "-ffast-math", "-march=native", "-Wno-unused"};
  r.extra_cuda_cflags = {"--use_fast_math", "-O3", "--expt-relaxed-constexpr", "-Xptxas=-v", "-maxrregcount=64", "-lineinfo",
                         "--ptxas-options=-v", "--maxrregcount=48", "-prec-div=false", "--ftz=true", "--fmad=true", "-Xptxas", "-O3"};
  r.extra_ldflags = {"-lcublas", "-lcudnn"};
  EXPECT_EQ(extension_request_problem(r), "");
}

TEST(TorchExtension, FlagsThatNameFilesPluginsOrToolsAreRefused) {
  for (const char* flag : {"-include", "-I/etc", "@/tmp/flags", "-fplugin=/tmp/p.so", "-B/tmp", "-specs=/tmp/s", "-Wl,--wrap=f",
                           "-Xcompiler", "-ccbin", "-isystem", "/etc/shadow", "-o"}) {
    ExtensionRequest r = relu_request();
    r.extra_cflags = {flag};
    const std::string why = extension_request_problem(r);
    EXPECT_NE(why.find("cand.py: load_inline's compile flag"), std::string::npos) << flag << ": " << why;
  }
  ExtensionRequest xptxas = relu_request();
  xptxas.extra_cuda_cflags = {"-Xptxas", "@/tmp/options"};
  EXPECT_NE(extension_request_problem(xptxas).find("'-Xptxas'"), std::string::npos);
  ExtensionRequest link = relu_request();
  link.extra_ldflags = {"-L/tmp"};
  EXPECT_NE(extension_request_problem(link).find("link flag '-L/tmp'"), std::string::npos);
}

TEST(TorchExtension, NamesMustBeIdentifiersAndCudaNeedsTheCudaBackend) {
  ExtensionRequest r = relu_request();
  r.name = "bad-name";
  EXPECT_NE(extension_request_problem(r).find("is not a Python identifier"), std::string::npos);
  r = relu_request();
  r.functions = {"f); system(\"x"};
  EXPECT_NE(extension_request_problem(r).find("is not a C++ identifier"), std::string::npos);
  r = relu_request();
  r.cuda_source = "__global__ void k() {}";
  EXPECT_NE(extension_request_problem(r).find("need the cuda backend"), std::string::npos);
}

TEST(TorchExtension, OnlyAnUndeclaredNameSendsTheSourceToTorchsOwnHeader) {
  EXPECT_TRUE(may_lack_a_declaration("cuda.cu:9:22: error: no member named 'functional' in namespace 'torch::nn'"));
  EXPECT_TRUE(may_lack_a_declaration("cuda.cu:3:1: error: unknown type name 'OrderedDict'"));
  EXPECT_TRUE(may_lack_a_declaration("main.cpp:2:47: error: 'functional' is not a member of 'torch::nn'"));  // g++
  EXPECT_TRUE(may_lack_a_declaration("main.cpp:3:1: error: 'OrderedDict' does not name a type"));
  EXPECT_FALSE(may_lack_a_declaration("cuda.cu:5:10: fatal error: cannot open file '/tmp/secret': Permission denied"));
  EXPECT_FALSE(may_lack_a_declaration("cuda.cu:7:3: error: expected ';' after expression"));
}

}  // namespace
}  // namespace crl
