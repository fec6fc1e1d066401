#!/usr/bin/env python3
"""The precision contract's elementwise rule, measured: each element's error over its error scale.

A float32 matrix product (level1/001's kind) on inputs with the value mix's magnitudes (a share of
the elements scaled by 2^4..2^10 both ways; optionally all positive, as a spec's `rand` gives where
signs are not mixed) is computed by legitimate float32 programs (split-K, a TF32x3 split, a pairwise
dot product, a sequential dot product: one thread's loop) and by TF32 operands. For each it prints
the largest error against float64 over three error scales: the element's own (the float32
reference's error plus how far nudging its inputs by a rounding step moves it: one random sample),
the largest own scale of its block of 32 and of 256 neighbours in flat order (the judge uses 256:
lib/worker/compare_rule.h), and the summed ratio (at most 32 passes). The figures in
docs/evaluation.md ("The bound") come from this script:

    ~/.local/share/crl/venv/bin/python tools/analysis/precision_element_rule.py [--trials 4]
"""
import argparse
import math

import torch

U = 2.0 ** -24


def with_magnitudes(x):
    """A log-uniform share in [1/4096, 1/8] of the elements scaled by 2^e, |e| in [4, 10], either sign of e."""
    share = math.exp(math.log(1 / 4096) + torch.rand(1).item() * (math.log(1 / 8) - math.log(1 / 4096)))
    moved = torch.rand(x.shape) < share
    exponent = torch.randint(4, 11, x.shape).float() * torch.where(torch.rand(x.shape) < 0.5, -1.0, 1.0)
    return torch.where(moved, x * torch.pow(2.0, exponent), x)


def nudge(x):
    p = torch.rand(x.shape)
    factor = torch.where(p < 0.25, 1 - 2**-23, torch.where(p < 0.5, 1 + 2**-23, 1.0))
    return (x.double() * factor.double()).float()


def tf32(x):
    return ((x.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def block_max(s, width):
    return s.reshape(-1, width).amax(1, keepdim=True).expand(-1, width).reshape(s.shape)


def programs(a, b):
    m, k = a.shape
    n = b.shape[1]
    quarter = k // 4
    split_k = sum(a[:, i * quarter:(i + 1) * quarter] @ b[i * quarter:(i + 1) * quarter] for i in range(4))
    ah, bh = tf32(a), tf32(b)
    tf32x3 = ah @ bh + (ah @ tf32(b - bh) + tf32(a - ah) @ bh)
    pairwise = torch.stack([(a[i:i + 1] * b.t()).sum(1) for i in range(m)])
    sequential = torch.zeros(m, n)
    for j in range(k):
        sequential += a[:, j:j + 1] * b[j:j + 1, :]
    return {"split-K": split_k, "TF32x3": tf32x3, "pairwise dot": pairwise, "sequential dot": sequential,
            "TF32 operands": ah @ bh}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 4096, 512], metavar=("M", "K", "N"))
    args = ap.parse_args()
    torch.manual_seed(2)
    torch.set_num_threads(1)
    m, k, n = args.shape
    print(f"{'trial':>5} {'inputs':>12} {'program':>15} {'own':>9} {'block 32':>9} {'block 256':>9} {'summed':>7}")
    for trial in range(args.trials):
        positive = trial % 2 == 1
        a, b = with_magnitudes(torch.randn(m, k)), with_magnitudes(torch.randn(k, n))
        if positive:
            a, b = a.abs(), b.abs()
        r32 = a @ b
        r64 = a.double() @ b.double()
        scale = (r64 - r32.double()).abs() + ((nudge(a) @ nudge(b)) - r32).double().abs()
        for name, c in programs(a, b).items():
            err = (c.double() - r64).abs()
            summed = err.sum().item() / (scale.sum().item() + U * r64.abs().sum().item())
            print(f"{trial:5d} {'positive' if positive else 'both signs':>12} {name:>15} {(err / scale).max().item():9.3g} "
                  f"{(err / block_max(scale, 32)).max().item():9.3g} {(err / block_max(scale, 256)).max().item():9.3g} {summed:7.3g}")


if __name__ == "__main__":
    main()
