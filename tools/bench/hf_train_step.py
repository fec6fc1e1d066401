#!/usr/bin/env python3
"""The training step of bench/train_bench.cpp written in PyTorch Python, for comparison.

A Qwen2-0.5B-shaped model (random weights, transformers' Qwen2ForCausalLM) in bf16 on one GPU,
batch 8 x 1024, next-token cross-entropy on every token, AdamW (fused, fp32 master weights as
crl: bf16 model, fp32 copies updated by the optimiser), grad-norm clipping at 1.0. Prints and
writes JSON with training tokens/s.

--lora: LoRA as PEFT computes it (rank 16, alpha 32, no dropout, on q/k/v/o/gate/up/down_proj:
y = W0 x + (alpha/r) B A x, base weights frozen), written out here because peft is not installed
on the GPU machine; only the adapters train, as in crl's BM_TrainStep/lora.

  python3 tools/bench/hf_train_step.py --out $OUT/hf_train_step.json [--lora] [--steps 20] [--profile 3]

--profile N: after timing, N more steps under torch.profiler; the GPU kernels' time per step by
name goes to stderr (compare with bench_train's CRL_BENCH_PROFILE=N).
"""
import argparse
import json
import sys
import time

import torch
import transformers
from torch.profiler import ProfilerActivity, profile


def qwen2_05b_config():
    return transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)


class LoraLinear(torch.nn.Module):
    """A frozen linear layer with a LoRA branch beside it: base(x) + scale * B(A(x))."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.scale = alpha / rank
        self.lora_a = torch.nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device,
                                                     dtype=base.weight.dtype).uniform_(-base.in_features ** -0.5,
                                                                                       base.in_features ** -0.5))
        self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device,
                                                     dtype=base.weight.dtype))

    def forward(self, x):
        return self.base(x) + self.scale * torch.nn.functional.linear(torch.nn.functional.linear(x, self.lora_a),
                                                                      self.lora_b)


def add_lora(model, rank=16, alpha=32.0,
             targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")):
    for p in model.parameters():
        p.requires_grad_(False)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, torch.nn.Linear):
                setattr(module, name, LoraLinear(child, rank, alpha))


def print_kernel_profile(steps, step):
    """The GPU kernels' time per step, summed by kernel name, longest first, to stderr.

    The GPU track also holds the optimiser's annotation (Optimizer.step#AdamW.step), which spans
    its kernels: subtract it from the total."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3 / steps
    by_name = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            spent, count = by_name.get(event.name, (0.0, 0))
            by_name[event.name] = (spent + event.time_range.elapsed_us() / 1e3 / steps, count + 1)
    total = sum(t for t, _ in by_name.values())
    print(f"GPU time per step: {total:.2f} ms over {len(by_name)} kernel names, in {wall_ms:.2f} ms of wall time "
          "(profiled)", file=sys.stderr)
    for name, (spent, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"{spent:9.3f} ms {100 * spent / total:5.1f}% {count // steps:5d} x  {name[:150]}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--profile", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = qwen2_05b_config()
    config._attn_implementation = "sdpa"
    model = transformers.Qwen2ForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    if args.lora:
        add_lora(model)
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    optimizer = torch.optim.AdamW(masters, lr=1e-5, weight_decay=0.0, fused=True)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")

    def step():
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].float().reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        loss.backward()
        for m, p in zip(masters, params):
            m.grad = p.grad.float()
            p.grad = None
        torch.nn.utils.clip_grad_norm_(masters, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_copy_(params, masters)
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    result = {
        "name": "hf_train_step_" + ("lora" if args.lora else "full") + ("_checkpointing" if args.checkpointing else ""),
        "batch": args.batch, "seq": args.seq, "seconds_per_step": seconds,
        "tokens_per_second": args.batch * args.seq / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(),
    }
    print(json.dumps(result, indent=2))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    if args.profile > 0:
        print_kernel_profile(args.profile, step)


if __name__ == "__main__":
    main()
