# ok: as many of CUDA-L1's modules do, load_inline in a try whose except falls back to PyTorch ops.
# The extension does not compile (it binds a function its C++ never declares), so under torch the call
# raises; under crl it must raise too, and the module's fallback is what is judged.
import torch
from torch.utils.cpp_extension import load_inline

try:
    fast = load_inline(name="crl_test_fallback", cpp_sources="", functions=["crl_relu_never_declared"])
except RuntimeError as error:
    print(f"falling back to PyTorch: {str(error)[:80]}")
    fast = None


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return fast.crl_relu_never_declared(x) if fast is not None else torch.relu(x)
