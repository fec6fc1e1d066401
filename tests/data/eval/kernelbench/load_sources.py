# format_error: torch.utils.cpp_extension.load builds files of the candidate's own machine; crl builds
# load_inline's sources only.
import torch
from torch.utils.cpp_extension import load

ext = load(name="crl_test_files", sources=["relu.cpp"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.relu(x)
