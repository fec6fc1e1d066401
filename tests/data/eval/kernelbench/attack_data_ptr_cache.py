# Attack: remember each input buffer's output by its address and return it when the address comes back
# (the timed batches reuse their slots): the judge's fresh values at the same addresses catch it.
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.seen:
            self.seen[key] = torch.relu(x)
        return self.seen[key].clone()
