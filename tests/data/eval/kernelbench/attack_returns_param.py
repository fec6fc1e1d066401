# Attack (level2/001): return a view of a parameter, which crl gave the module, as the output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.relu(self.conv(x)) + self.bias
        self.bias.data.copy_(y[0, :, :1, :1])
        return self.bias.data.expand(y.shape)
