# mismatch under KernelBench's rule: the module's tensors declared as Model's, then set to values of its
# own (ones), not those Model makes under the seed: its outputs are not Model's.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        with torch.no_grad():
            self.conv.weight.fill_(0.01)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias
