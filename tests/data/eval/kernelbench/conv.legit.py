# A legitimate candidate for level2/001_conv2d_relu_bias_add: KernelBench's module as it declares its
# parameters (bias first, then conv's), so crl's values reach it by order and shape.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias
