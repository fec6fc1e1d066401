# ok under KernelBench's rule, format_error under crl's: built as KernelBench's Model builds its tensors
# (the same random draws in the same order), then kept as one packed parameter, unpacked in forward.
# crl's rule cannot give it the task's values (one tensor, not three); KernelBench's judges its outputs.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        bias = torch.randn(bias_shape)
        self.shapes = (conv.weight.shape, conv.bias.shape, bias.shape)
        self.packed = nn.Parameter(torch.cat([conv.weight.detach().flatten(), conv.bias.detach(), bias.flatten()]))

    def forward(self, x):
        w_shape, b_shape, bias_shape = self.shapes
        w_n, b_n = w_shape.numel(), b_shape.numel()
        weight = self.packed[:w_n].view(w_shape)
        conv_bias = self.packed[w_n:w_n + b_n]
        bias = self.packed[w_n + b_n:].view(bias_shape)
        return torch.relu(torch.nn.functional.conv2d(x, weight, conv_bias)) + bias
