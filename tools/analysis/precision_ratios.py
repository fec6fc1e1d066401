#!/usr/bin/env python3
"""The precision contract's ratio for float32 programs and lower-precision ones, on the CPU.

The ratio as the judge computes it (lib/worker/compare_rule.h, float64_reference.h): the candidate's
error against the reference computed in float64, summed over the output, over the error float32
arithmetic makes there (the float32 reference's own error against float64 plus how far nudging its
inputs by a rounding step moves it), plus 2^-24 of each result. At most 32 (kPrecisionFactor)
passes. The figures in docs/evaluation.md ("The precision contract") come from this script:

    ~/.local/share/crl/venv/bin/python tools/analysis/precision_ratios.py
"""
import torch

U = 2.0 ** -24


def tf32(x):
    """x rounded to TF32's 10 mantissa bits, as tensor cores read a float32."""
    return ((x.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def nudged(args):
    """Each element one float32 step up, down, or left (a quarter, a quarter, a half)."""
    out = []
    for a in args:
        p = torch.rand(a.shape)
        f = torch.where(p < 0.25, 1 - 2**-23, torch.where(p < 0.5, 1 + 2**-23, torch.ones_like(p)))
        out.append((a.double() * f.double()).float())
    return out


def ratio(candidate, op, args):
    r32 = op(*args)
    r64 = op(*[a.double() for a in args])
    scale = (r64 - r32.double()).abs() + (op(*nudged(args)).double() - r32.double()).abs()
    return float((candidate.double() - r64).abs().sum() / (scale.sum() + U * r64.abs().sum()))


def sequential_row_sums(x):
    s = torch.zeros(x.shape[0])
    for j in range(x.shape[1]):
        s = s + x[:, j]
    return s


def online_softmax(x, chunk=512):
    m = torch.full((x.shape[0], 1), -float("inf"))
    s = torch.zeros(x.shape[0], 1)
    for i in range(0, x.shape[1], chunk):
        c = x[:, i : i + chunk]
        new = torch.maximum(m, c.max(1, keepdim=True).values)
        s = s * torch.exp(m - new) + torch.exp(c - new).sum(1, keepdim=True)
        m = new
    return torch.exp(x - m) / s


def matmuls(a, b, name):
    mm = lambda x, y: x @ y
    ah, bh = tf32(a), tf32(b)
    al, bl = tf32(a - ah), tf32(b - bh)
    split_k = sum(a[:, i : i + 64] @ b[i : i + 64] for i in range(0, a.shape[1], 64))
    rows = {
        "the reference": a @ b,
        "split-K order": split_k,
        "TF32x3 split": ah @ bh + (ah @ bl + al @ bh),
        "TF32 operands": ah @ bh,
        "fp16 operands": a.half().float() @ b.half().float(),
        "bf16 operands": a.bfloat16().float() @ b.bfloat16().float(),
    }
    print(f"matmul 128x2048x64, {name}: " + ", ".join(f"{k} {ratio(v, mm, [a, b]):.2g}" for k, v in rows.items()))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    a, b = torch.rand(128, 2048), torch.rand(2048, 64)
    matmuls(a, b, "all-positive (rand)")
    signs = lambda t: torch.where(torch.rand(t.shape) < 0.5, -1.0, 1.0)
    matmuls(a * signs(a), b * signs(b), "both signs")
    row_sum = lambda x: x.sum(1)
    for name, x in [("randn", torch.randn(256, 16384)), ("rand", torch.rand(256, 16384))]:
        print(f"row sums of 16K {name}: naive sequential {ratio(sequential_row_sums(x), row_sum, [x]):.2g}, "
              f"fp16 inputs {ratio(x.half().float().sum(1), row_sum, [x]):.2g}")
    x = torch.randn(256, 4096) * 3
    softmax = lambda t: torch.softmax(t, 1)
    print(f"softmax: online {ratio(online_softmax(x), softmax, [x]):.2g}, fp16 {ratio(torch.softmax(x.half().float(), 1), softmax, [x]):.2g}")
    x = torch.randn(1 << 16)
    print(f"relu in fp16: {ratio(torch.relu(x.half()).float(), torch.relu, [x]):.2g}")
    x = torch.randn(1 << 18) * 10
    fast_exp = torch.exp2(x * torch.tensor(1.4426950408889634, dtype=torch.float32))
    print(f"exp as exp2(x log2 e), x ~ N(0, 100): {ratio(fast_exp, torch.exp, [x]):.2g}")
    x = torch.randn(1 << 16) * 4
    print(f"tanh as 1 - 2 / (exp(2x) + 1): {ratio(1 - 2 / (torch.exp(2 * x) + 1), torch.tanh, [x]):.2g}, "
          f"in fp16 {ratio(torch.tanh(x.half()).float(), torch.tanh, [x]):.2g}")
    gelu = torch.nn.functional.gelu
    print(f"GELU by its tanh approximation: {ratio(gelu(x, approximate='tanh'), gelu, [x]):.2g}")


if __name__ == "__main__":
    main()
