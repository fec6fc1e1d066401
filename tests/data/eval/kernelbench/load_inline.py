# format_error until crl compiles load_inline for the worker: a clear refusal, not a failed process start.
import torch
from torch.utils.cpp_extension import load_inline

relu = load_inline(name="relu", cpp_sources="torch::Tensor relu(torch::Tensor x) { return x.relu(); }", functions=["relu"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return relu.relu(x)
