#!/usr/bin/env python3
"""Generation throughput, crl against transformers' generate(), on the same random model and batch.

Makes a Qwen2-0.5B-shaped random model in bf16 (hidden 896, 24 layers, 14 heads, 2 kv heads,
intermediate 4864, vocab 151936, tied embeddings) with transformers, times transformers'
generate() (PROMPT-token random prompts, NEW new tokens, sampling from softmax with no eos) at each
batch size, runs crl's bench_generate on the same folder, and writes both figures with the speedup
to OUT/generate_bench.json. Tokens per second = batch x new tokens / wall time of one generate call
(prefill included), median of --repeats runs after a warm-up.

One command on the GPU machine (after tools/gpu-build.sh built build-gpu/):
  python3 tools/bench/hf_generate.py --out $OUT
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, Qwen2Config


def make_model(folder, seed):
    if os.path.exists(os.path.join(folder, "config.json")):
        return
    config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                         tie_word_embeddings=True, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)


def time_hf(folder, batches, prompt_len, new_tokens, repeats):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda").eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    results = {}
    for batch in batches:
        gen = torch.Generator().manual_seed(1234 + batch)
        ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=gen).to("cuda")
        mask = torch.ones_like(ids)
        kwargs = dict(attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                      min_new_tokens=new_tokens, max_new_tokens=new_tokens)
        with torch.no_grad():
            model.generate(ids, **{**kwargs, "min_new_tokens": 4, "max_new_tokens": 4})  # warm-up
            times = []
            for _ in range(repeats):
                torch.cuda.synchronize()
                start = time.perf_counter()
                out = model.generate(ids, **kwargs)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
                assert out.shape[1] == prompt_len + new_tokens, out.shape
        seconds = statistics.median(times)
        results[str(batch)] = {"tokens_per_second": batch * new_tokens / seconds, "seconds": seconds}
        print(f"transformers batch {batch}: {batch * new_tokens / seconds:.1f} tokens/s", flush=True)
    del model
    torch.cuda.empty_cache()
    return results


def time_crl(bench, folder, out_dir, prompt_len, new_tokens):
    raw = os.path.join(out_dir, "crl_bench_generate.json")
    env = dict(os.environ, CRL_BENCH_MODEL=folder, CRL_BENCH_DEVICE="cuda", CRL_BENCH_DTYPE="bf16",
               CRL_BENCH_PROMPT=str(prompt_len), CRL_BENCH_NEW=str(new_tokens))
    subprocess.run([bench, "--benchmark_format=console", f"--benchmark_out={raw}", "--benchmark_out_format=json"],
                   env=env, check=True)
    with open(raw) as f:
        data = json.load(f)
    results = {}
    for b in data["benchmarks"]:
        batch = b["name"].split("/")[1]
        results[batch] = {k: b[k] for k in ("tokens_per_second", "decode_tokens_per_second", "prefill_ms", "cuda_graph")}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--model-dir", default="/tmp/crl_bench_qwen2_0p5b_random",
                        help="where the random model is written (kept out of --out: it is 1 GB)")
    parser.add_argument("--bench", default="build-gpu/bench/bench_generate")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-hf", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    make_model(args.model_dir, seed=0)
    report = {"model": "Qwen2-0.5B-shaped random, bf16", "prompt_tokens": args.prompt_len,
              "new_tokens": args.new_tokens, "gpu": torch.cuda.get_device_name(0),
              "transformers": transformers.__version__, "torch": torch.__version__,
              "metric": "batch x new tokens / wall time of one generate call (prefill included), median"}
    report["crl"] = time_crl(args.bench, args.model_dir, args.out, args.prompt_len, args.new_tokens)
    if not args.skip_hf:
        report["transformers_generate"] = time_hf(args.model_dir, batches, args.prompt_len, args.new_tokens, args.repeats)
        report["speedup"] = {b: report["crl"][b]["tokens_per_second"] / report["transformers_generate"][b]["tokens_per_second"]
                             for b in report["crl"] if b in report["transformers_generate"]}
        report["target_3x_met"] = all(s >= 3 for s in report["speedup"].values())
    with open(os.path.join(args.out, "generate_bench.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(main())
