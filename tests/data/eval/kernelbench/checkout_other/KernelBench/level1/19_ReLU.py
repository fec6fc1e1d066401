# A checkout whose module does not match the suite's spec (a parameter the task's ReLU does not
# have): under KernelBench's rule the judge cannot give crl's reference Model's values.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return torch.relu(x) * self.scale
