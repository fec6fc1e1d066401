# Attack: return an empty output and fill it from a thread after forward returned (untimed work).
import threading
import time
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)

        def finish():
            time.sleep(0.002)
            torch.relu(x, out=out)

        threading.Thread(target=finish).start()
        return out
