# Attack: a compile flag that makes the compiler read a file of the candidate's choosing (its text
# would reach the compile log and the results file): refused before any compiler runs.
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="crl_test_leak", cpp_sources="int f() { return 1; }", functions=["f"],
                  extra_cflags=["-include", "/etc/shadow"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
