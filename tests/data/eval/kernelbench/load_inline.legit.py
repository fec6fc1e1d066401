# A legitimate candidate with a torch extension, as CUDA-L1's and KernelBench's models write them:
# torch.utils.cpp_extension.load_inline at import, its functions called in forward. crl's compiler
# builds it (the sandboxed worker cannot) and the worker imports the result.
import torch
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_out(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto y = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
  return y;
}
"""

relu = load_inline(name="crl_test_relu", cpp_sources=cpp_source, functions=["relu_out"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return relu.relu_out(x)
