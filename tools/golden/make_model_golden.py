#!/usr/bin/env python3
"""Golden logits for crl's policy model, made with Hugging Face transformers on tiny random models.

For each of several Qwen2 / Llama configs (GQA ratios, tied/untied embeddings, rope theta, llama3 /
linear / yarn rope scaling, attention and MLP biases) it builds a random model with transformers,
writes it with save_pretrained (config.json + model.safetensors, fp32) and writes golden.safetensors:
  input_ids      [B, S] int64   fixed token ids (seeded)
  logits_fp32    [B, S, V] f32  transformers' logits in fp32 on --device
  logits_bf16    [B, S, V] f32  transformers' logits with the model in bf16 on --device (cast to f32)
and golden.json with versions and hf_bf16_max_rel_err = max|bf16 - fp32| / max|fp32|, the bound crl's
bf16 logits are held to. Relative errors in crl's tests use the same definition (error over the
logits' largest magnitude), which stays meaningful where single logits are near zero.

Usage (CPU goldens committed under tests/data/policy/models, made with the golden venv):
  ~/.local/share/crl/golden-venv/bin/python tools/golden/make_model_golden.py --out tests/data/policy/models
On the GPU machine (transformers' fp32 and bf16 on CUDA for the committed models; the gpu-labelled
test reads the bf16 drift from there when CRL_MODEL_GOLDEN_CUDA_DIR=$OUT/model_golden):
  python3 tools/golden/make_model_golden.py --device cuda --reuse-models tests/data/policy/models \
      --out $OUT/model_golden
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

BATCH, STEPS = 2, 12


def configs():
    """name -> transformers config; all tiny so the committed files stay small."""
    common = dict(num_hidden_layers=2, max_position_embeddings=256, initializer_range=0.2,
                  rms_norm_eps=1e-6)
    return {
        # Qwen2, GQA 2:1, tied embeddings, Qwen's rope theta.
        "qwen2_gqa2_tied": Qwen2Config(vocab_size=320, hidden_size=64, intermediate_size=128,
                                       num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                                       **common),
        # Qwen2, plain multi-head attention, untied, theta 10000.
        "qwen2_mha_untied": Qwen2Config(vocab_size=288, hidden_size=48, intermediate_size=96,
                                        num_attention_heads=3, num_key_value_heads=3, tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                                        **common),
        # Llama 3 style: GQA 4:1, llama3 rope scaling, untied, no biases.
        "llama3_gqa4_rope_llama3": LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96,
                                               num_attention_heads=8, num_key_value_heads=2, head_dim=8,
                                               tie_word_embeddings=False,
                                               rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                                                "factor": 8.0, "low_freq_factor": 1.0,
                                                                "high_freq_factor": 4.0,
                                                                "original_max_position_embeddings": 64},
                                               **common),
        # Llama with attention and MLP biases, multi-query (1 kv head), linear rope scaling, tied,
        # and a head_dim that is not hidden/heads.
        "llama_mqa_bias_linear": LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=80,
                                             num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                             attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                                             rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                                              "factor": 2.0},
                                             **common),
        # Llama with yarn rope scaling (attention factor from the default mscale).
        "llama_yarn": LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                                  num_attention_heads=4, num_key_value_heads=2,
                                  tie_word_embeddings=False,
                                  rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                   "original_max_position_embeddings": 64},
                                  **common),
    }


def randomise(model, seed):
    """transformers' init leaves biases 0 and norm weights 1, which would hide loading mistakes."""
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            elif "norm" in name:
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.1)


def rel_err(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder; one sub-folder per model is written")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--reuse-models", metavar="DIR",
                        help="read the models from DIR (e.g. the committed ones) instead of making new ones")
    args = parser.parse_args()
    device = torch.device(args.device)
    summary = {}
    for index, (name, config) in enumerate(configs().items()):
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        if args.reuse_models:
            model = AutoModelForCausalLM.from_pretrained(os.path.join(args.reuse_models, name), dtype=torch.float32)
        else:
            torch.manual_seed(args.seed + index)
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            randomise(model, args.seed + index)
            model.save_pretrained(folder)
        model = model.to(device).eval()
        gen = torch.Generator().manual_seed(args.seed + 100 + index)
        input_ids = torch.randint(0, model.config.vocab_size, (BATCH, STEPS), generator=gen)
        with torch.no_grad():
            logits_fp32 = model(input_ids.to(device)).logits.float().cpu()
            model_bf16 = model.to(torch.bfloat16)
            logits_bf16 = model_bf16(input_ids.to(device)).logits.float().cpu()
        err = rel_err(logits_bf16, logits_fp32)
        suffix = "" if args.device == "cpu" else "_" + device.type
        save_file({"input_ids": input_ids.contiguous(), "logits_fp32": logits_fp32.contiguous(),
                   "logits_bf16": logits_bf16.contiguous()}, os.path.join(folder, f"golden{suffix}.safetensors"))
        info = {"transformers": transformers.__version__, "torch": torch.__version__, "device": args.device,
                "attn_implementation": model.config._attn_implementation, "seed": args.seed,
                "hf_bf16_max_rel_err": err, "batch": BATCH, "steps": STEPS}
        with open(os.path.join(folder, f"golden{suffix}.json"), "w") as f:
            json.dump(info, f, indent=2)
        summary[name] = info
        print(f"{name}: hf bf16 vs fp32 max rel err {err:.3e}")
    with open(os.path.join(args.out, f"summary_{args.device}.json"), "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
