# A legitimate candidate with a CUDA extension (the GPU backend), as CUDA-L1's kernels are written:
# load_inline with cpp_sources declaring what cuda_sources define. crl's compiler builds both halves.
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  auto y = torch::empty_like(x);
  const long n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

relu = load_inline(name="crl_test_relu_cuda", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                   cuda_sources="#include <ATen/cuda/CUDAContext.h>\n" + cuda_source, functions=["relu_cuda"],
                   extra_cuda_cflags=["-O3", "--use_fast_math"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return relu.relu_cuda(x)
