# Legitimate twin of mode_left_on.py: a __torch_function__ mode used inside forward and left there.
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode


class Passthrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        with Passthrough():
            return torch.relu(x)
