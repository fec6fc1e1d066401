# Legitimate, as 7 of CUDA-L1's H100 modules do in their constructors: read torch's legacy TF32 flags
# (and set them; on the CPU they change nothing). The worker's own precision settings must leave
# these getters working (torch 2.11 raises on "a mix of the legacy and new APIs").
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        if hasattr(torch.backends.cudnn, "allow_tf32") and not torch.backends.cudnn.allow_tf32:
            torch.backends.cudnn.allow_tf32 = True
        self.matmul_tf32 = torch.backends.cuda.matmul.allow_tf32

    def forward(self, x):
        return torch.relu(x)
