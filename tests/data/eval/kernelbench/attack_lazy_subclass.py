# Attack (CUDA-L1's finding): return a tensor subclass whose methods compute when the judge compares,
# so the timed call does nothing. Outputs must be plain torch.Tensor.
import torch


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.empty_like(x).as_subclass(Lazy)
