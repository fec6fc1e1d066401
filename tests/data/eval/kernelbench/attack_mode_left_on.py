# Attack: leave a dispatch mode on after forward, so that it runs inside the worker's own operations on
# the outputs (describing, copying) and computes there, untimed. Refused: no mode may outlive forward.
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Late(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        Late().__enter__()
        return torch.relu(x)
