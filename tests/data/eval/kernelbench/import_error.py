# compile_error: the module does not import.
import torch
import crl_no_such_module


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
