# Attack: start a process from forward (a compiler, a helper that times or fakes): the sandbox forbids it.
import subprocess
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        subprocess.run(["true"], check=True)
        return torch.relu(x)
