# format_error: torch.compile starts compiler processes (Inductor, Triton), which the sandboxed worker
# cannot; the refusal says so instead of a failed process start.
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = torch.compile(torch.relu)

    def forward(self, x):
        return self.relu(x)
