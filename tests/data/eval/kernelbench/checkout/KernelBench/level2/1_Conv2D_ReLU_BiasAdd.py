# A stand-in for KernelBench's level2/1 module, written for crl's tests (a checkout of KernelBench is
# not part of crl): a convolution, ReLU, and a learned bias added, its tensors declared as the task's
# spec records them (conv.weight, conv.bias, bias).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias
