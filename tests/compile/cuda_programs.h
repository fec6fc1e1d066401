// CUDA candidate programs and a load_inline extension shared by the compile tests and the compile benchmark.
#pragma once

#include <string>

#include "compile/torch_extension.h"

namespace crl::testing {

// A two-kernel CUDA candidate for y = relu(x) * 2 + 1 (a float4 relu kernel, then an affine one),
// with `tag` in a comment so callers can force a cache miss.
inline std::string two_kernel_cuda_program(const std::string& tag) {
  return "// crl:device\n"
         "__global__ void relu_kernel(const float4* x, float4* y, int64_t n4) {\n"
         "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;\n"
         "       i += (int64_t)gridDim.x * blockDim.x) {\n"
         "    float4 v = x[i];\n"
         "    y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));\n"
         "  }\n"
         "}\n"
         "__global__ void affine_kernel(float* y, int64_t n, float a, float b) {\n"
         "  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = a * y[i] + b;\n"
         "}\n"
         "extern \"C\" void relu_affine(const float* x, float* y, int64_t n, cudaStream_t stream) {\n"
         "  relu_kernel<<<1056, 256, 0, stream>>>((const float4*)x, (float4*)y, n / 4);\n"
         "  affine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, n, 2.f, 1.f);\n"
         "}\n"
         "// crl:host\n"
         "// " + tag + "\n"
         "extern \"C\" void relu_affine(const float* x, float* y, int64_t n, cudaStream_t stream);\n"
         "at::Tensor forward(const at::Tensor& x) {\n"
         "  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.numel() % 4 == 0, \"x: contiguous CUDA, numel % 4 == 0\");\n"
         "  at::Tensor y = at::empty_like(x);\n"
         "  relu_affine(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());\n"
         "  return y;\n"
         "}\n";
}

// A CUDA candidate that calls cuBLAS directly: y = 3 * x + y0 through cublasSaxpy on a copy.
inline std::string cublas_program(const std::string& tag) {
  return "// crl:host\n"
         "// " + tag + "\n"
         "#include <cublas_v2.h>\n"
         "at::Tensor forward(const at::Tensor& x, const at::Tensor& y0) {\n"
         "  at::Tensor y = y0.clone();\n"
         "  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();\n"
         "  // LibTorch's shared handle: set the pointer mode this call relies on (alpha is on the host).\n"
         "  cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST);\n"
         "  const float alpha = 3.f;\n"
         "  TORCH_CHECK(cublasSaxpy(handle, (int)x.numel(), &alpha, x.data_ptr<float>(), 1, y.data_ptr<float>(), 1)\n"
         "              == CUBLAS_STATUS_SUCCESS, \"cublasSaxpy failed\");\n"
         "  return y;\n"
         "}\n";
}

// load_inline's relu as CUDA-L1's kernels write it (a ReLU kernel, its wrapper on torch's current
// stream, -O3 --use_fast_math); `extra` is appended to the CUDA sources, `tag` keeps each a cache miss.
inline ExtensionRequest relu_cuda_extension(const std::string& tag, const std::string& extra = "") {
  ExtensionRequest r;
  r.origin = "cand.py";
  r.name = "relu_ext";
  r.cpp_source = "torch::Tensor relu(torch::Tensor x);";
  r.cuda_source = "#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n// " + tag +
                  "\n__global__ void relu_kernel(const float* x, float* y, long n) {\n"
                  "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n  if (i < n) y[i] = fmaxf(x[i], 0.f);\n}\n"
                  "torch::Tensor relu(torch::Tensor x) {\n  auto y = torch::empty_like(x);\n  const long n = x.numel();\n"
                  "  relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), "
                  "y.data_ptr<float>(), n);\n  return y;\n}\n" + extra;
  r.functions = {"relu"};
  r.extra_cuda_cflags = {"-O3", "--use_fast_math"};  // CUDA-L1's most common flags
  r.cuda = true;
  return r;
}

}  // namespace crl::testing
