# Attack: compute in place and hand the input back as the output (no allocation, no write traffic).
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.relu_()
