# compile_error: the extension's C++ does not compile; the verdict keeps the compiler's message.
import torch
from torch.utils.cpp_extension import load_inline

broken = load_inline(name="crl_test_broken", cpp_sources="torch::Tensor f(torch::Tensor x) { return x.crl_no_such_method(); }",
                     functions=["f"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return broken.f(x)
