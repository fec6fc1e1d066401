#!/usr/bin/env python3
"""Golden greedy generations for crl's engine, made with Hugging Face transformers' generate().

Two modes:

1. The committed tiny models (tests/data/policy/models/*, made by make_model_golden.py): for each,
   greedy decoding in fp32 on the CPU of NEW tokens after a few fixed prompts, written to
   <model>/generate_golden.json: {"prompts": [[ids]], "tokens": [[ids]], "margins": [[top1 - top2]]}
   (the margins let a reader see how close each step was to a tie). Usage:
     ~/.local/share/crl/venv/bin/python tools/golden/make_generate_golden.py --models tests/data/policy/models

2. --qwen2-0p5b DIR: a random model of Qwen2-0.5B's shape (hidden 896, 24 layers, 14 heads, 2 kv
   heads, intermediate 4864, vocab 151936, tied), its embedding scaled up 10x so that logits are not
   flat, saved to DIR (fp32), and DIR/generate_golden.json with transformers' greedy tokens in fp32,
   and, for the same prompts, the log-softmax of the fp32 greedy tokens under transformers' fp32 and
   bf16 models (teacher-forced over the fp32 tokens), and the two models' last-prompt-position
   logits' relative difference. policy_generate_gpu_test runs this on the GPU machine. Usage:
     python3 tools/golden/make_generate_golden.py --qwen2-0p5b /tmp/crl_qwen2_0p5b --device cuda
"""
import argparse
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM, Qwen2Config

NEW = 64
TINY_PROMPTS = [[5, 17, 42, 9, 100, 3, 77], [11, 12], [250, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]]


def greedy(model, prompt, new, device):
    ids = torch.tensor([prompt], device=device)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new,
                             min_new_tokens=new, output_logits=True, return_dict_in_generate=True,
                             eos_token_id=None, pad_token_id=0)
    tokens = out.sequences[0, len(prompt):].tolist()
    margins = []
    for step in out.logits:
        top = step[0].float().topk(2).values
        margins.append(float(top[0] - top[1]))
    return tokens, margins


def tiny(models_dir):
    for name in sorted(os.listdir(models_dir)):
        folder = os.path.join(models_dir, name)
        if not os.path.exists(os.path.join(folder, "config.json")):
            continue
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        vocab = model.config.vocab_size
        prompts = [[t % vocab for t in p] for p in TINY_PROMPTS]
        tokens, margins = zip(*(greedy(model, p, NEW, "cpu") for p in prompts))
        golden = {"transformers": transformers.__version__, "torch": torch.__version__, "device": "cpu",
                  "dtype": "fp32", "prompts": prompts, "tokens": list(tokens), "margins": list(margins)}
        with open(os.path.join(folder, "generate_golden.json"), "w") as f:
            json.dump(golden, f)
        print(f"{name}: smallest top-2 margin {min(min(m) for m in margins):.3e}")


def log_probs_of(model, prompt, tokens, device):
    ids = torch.tensor([prompt + tokens], device=device)
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    log_probs = logits[len(prompt) - 1:-1].log_softmax(-1)
    return log_probs.gather(1, torch.tensor(tokens, device=device).view(-1, 1)).view(-1).tolist(), logits[len(prompt) - 1]


def qwen2_0p5b(folder, device, seed):
    if not os.path.exists(os.path.join(folder, "config.json")):
        config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                             num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                             tie_word_embeddings=True, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        with torch.no_grad():
            model.model.embed_tokens.weight.mul_(10.0)
        model.save_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    prompts = [torch.randint(0, 151936, (n,), generator=gen).tolist() for n in (128, 37)]
    tokens, margins, lp32, lp16, prompt_err = [], [], [], [], []
    for p in prompts:
        t, m = greedy(model, p, NEW, device)
        tokens.append(t)
        margins.append(m)
        lp, last32 = log_probs_of(model, p, t, device)
        lp32.append(lp)
    model = model.to(torch.bfloat16)
    for p, t in zip(prompts, tokens):
        lp, last16 = log_probs_of(model, p, t, device)
        lp16.append(lp)
    golden = {"transformers": transformers.__version__, "torch": torch.__version__, "device": device,
              "prompts": prompts, "tokens": tokens, "margins": margins,
              "fp32_logprobs": lp32, "bf16_logprobs": lp16}
    with open(os.path.join(folder, "generate_golden.json"), "w") as f:
        json.dump(golden, f)
    drift = max(abs(a - b) for x, y in zip(lp32, lp16) for a, b in zip(x, y))
    print(f"qwen2-0.5b-shaped: transformers bf16 vs fp32 log-prob drift on the greedy tokens {drift:.3e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="folder of the committed tiny models")
    parser.add_argument("--qwen2-0p5b", metavar="DIR", help="make (or reuse) the 0.5B-shaped model in DIR")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if args.models:
        tiny(args.models)
    if args.qwen2_0p5b:
        qwen2_0p5b(args.qwen2_0p5b, args.device, args.seed)
    if not args.models and not args.qwen2_0p5b:
        parser.error("give --models or --qwen2-0p5b")


if __name__ == "__main__":
    main()
