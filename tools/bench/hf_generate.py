#!/usr/bin/env python3
"""Generation throughput for issue #16's table: crl's engine, crl's pre-engine generate() and
transformers' generate(), on the same random model and the same work, in one call.

Makes a Qwen2-0.5B-shaped random model in bf16 (hidden 896, 24 layers, 14 heads, 2 kv heads,
intermediate 4864, vocab 151936, tied embeddings) with transformers, runs crl's bench_generate on it
(rows Batch/1 and Batch/64: PROMPT-token random prompts, NEW new tokens; GroupMixed: 16 completions
of one 2048-token prompt, lengths 64, 128, ..., 1024; each also as the frozen pre-engine static batch,
the *Baseline rows), then times transformers' generate() (dynamic cache; sampling from softmax, no
eos) on the same rows: for GroupMixed all 16 rows run to 1024 tokens (transformers cannot end a row
early without eos) and only the requested tokens count, as for crl's baseline. Optionally
(--hf-static) transformers' static cache with torch.compile at batch 1, in a child process, since it
crashed on the H200 before. Tokens per second = generated tokens / wall time of one generate call
(prefill included), median of --repeats runs after a warm-up. Writes OUT/generate_bench.json.

One command on the GPU machine (after tools/gpu-build.sh or tools/gpu-measure.sh built build-gpu/):
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

GOALS = {"Batch/1": ("tokens_per_second", 2400), "GroupMixed": ("speedup_vs_baseline", 4), "Batch/64": ("speedup_vs_baseline", 3)}


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


def group_lengths(group, new):
    return [max(1, new * k // group) for k in range(1, group + 1)]


def time_hf_call(model, ids, new_tokens, repeats, **extra):
    kwargs = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                  min_new_tokens=new_tokens, max_new_tokens=new_tokens, **extra)
    with torch.no_grad():
        model.generate(ids, **{**kwargs, "min_new_tokens": 4, "max_new_tokens": 4})  # warm-up
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = model.generate(ids, **kwargs)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return statistics.median(times)


def time_hf(folder, args):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda").eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    vocab = model.config.vocab_size
    results = {}
    for batch in (1, 64):
        gen = torch.Generator().manual_seed(1234 + batch)
        ids = torch.randint(0, vocab, (batch, args.prompt_len), generator=gen).to("cuda")
        seconds = time_hf_call(model, ids, args.new_tokens, args.repeats)
        results[f"Batch/{batch}"] = {"tokens_per_second": batch * args.new_tokens / seconds, "seconds": seconds}
        print(f"transformers Batch/{batch}: {batch * args.new_tokens / seconds:.1f} tokens/s", flush=True)
    gen = torch.Generator().manual_seed(99)
    prompt = torch.randint(0, vocab, (1, args.group_prompt), generator=gen).to("cuda")
    ids = prompt.expand(args.group, -1).contiguous()
    seconds = time_hf_call(model, ids, args.group_new, 1)
    useful = sum(group_lengths(args.group, args.group_new))
    results["GroupMixed"] = {"tokens_per_second": useful / seconds, "seconds": seconds,
                             "note": "all rows decoded to the longest length; only the requested tokens count"}
    print(f"transformers GroupMixed: {useful / seconds:.1f} useful tokens/s", flush=True)
    del model
    torch.cuda.empty_cache()
    return results


STATIC_CHILD = r"""
import sys, time, torch
from transformers import AutoModelForCausalLM
folder, prompt_len, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda").eval()
model.generation_config.eos_token_id = None
model.generation_config.pad_token_id = 0
model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
ids = torch.randint(0, model.config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1235)).to("cuda")
kw = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
          cache_implementation="static", min_new_tokens=new, max_new_tokens=new)
with torch.no_grad():
    for _ in range(2):
        model.generate(ids, **kw)
    torch.cuda.synchronize(); start = time.perf_counter()
    model.generate(ids, **kw)
    torch.cuda.synchronize()
print("TOKENS_PER_SECOND", new / (time.perf_counter() - start))
"""


def time_hf_static(folder, args):
    try:
        r = subprocess.run([sys.executable, "-c", STATIC_CHILD, folder, str(args.prompt_len), str(args.new_tokens)],
                           capture_output=True, text=True, timeout=args.static_timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timed out after {args.static_timeout} s"}
    for line in r.stdout.splitlines():
        if line.startswith("TOKENS_PER_SECOND"):
            return {"status": "ran", "tokens_per_second": float(line.split()[1])}
    reason = f"exit code {r.returncode}" if r.returncode >= 0 else f"killed by signal {-r.returncode}"
    return {"status": f"failed: {reason}", "stderr_tail": r.stderr[-1500:]}


def time_crl(bench, folder, out_dir, args):
    raw = os.path.join(out_dir, "crl_bench_generate.json")
    env = dict(os.environ, CRL_BENCH_MODEL=folder, CRL_BENCH_DEVICE="cuda", CRL_BENCH_DTYPE="bf16",
               CRL_BENCH_PROMPT=str(args.prompt_len), CRL_BENCH_NEW=str(args.new_tokens),
               CRL_BENCH_GROUP=str(args.group), CRL_BENCH_GROUP_PROMPT=str(args.group_prompt),
               CRL_BENCH_GROUP_NEW=str(args.group_new))
    if args.profile:
        env["CRL_BENCH_PROFILE"] = str(args.profile)
    subprocess.run([bench, "--benchmark_format=console", f"--benchmark_out={raw}", "--benchmark_out_format=json",
                    f"--benchmark_filter={args.filter}"], env=env, check=True)
    with open(raw) as f:
        data = json.load(f)
    results = {}
    for b in data["benchmarks"]:
        name = b["name"].split("/iterations")[0].replace("BM_", "")
        results[name] = {k: v for k, v in b.items() if isinstance(v, (int, float)) and k not in ("repetitions", "threads")}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--model-dir", default="/tmp/crl_bench_qwen2_0p5b_random",
                        help="where the random model is written (kept out of --out: it is 1 GB)")
    parser.add_argument("--bench", default="build-gpu/bench/bench_generate")
    parser.add_argument("--filter", default=".", help="bench_generate's --benchmark_filter")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--group-prompt", type=int, default=2048)
    parser.add_argument("--group-new", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", type=int, default=0, help="CRL_BENCH_PROFILE: kernels of an N-step eager run")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--hf-static", action="store_true", help="also try transformers' static cache + torch.compile")
    parser.add_argument("--static-timeout", type=int, default=300)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    make_model(args.model_dir, seed=0)
    report = {"model": "Qwen2-0.5B-shaped random, bf16", "prompt_tokens": args.prompt_len, "new_tokens": args.new_tokens,
              "group": {"completions": args.group, "prompt_tokens": args.group_prompt,
                        "lengths": group_lengths(args.group, args.group_new)},
              "gpu": torch.cuda.get_device_name(0), "transformers": transformers.__version__, "torch": torch.__version__,
              "metric": "generated tokens / wall time of one generate call (prefill included), median"}
    crl = time_crl(args.bench, args.model_dir, args.out, args)
    report["crl"] = crl
    rows = {}
    for row in ("Batch/1", "Batch/64", "GroupMixed"):
        if row not in crl:
            continue
        baseline_name = row.replace("Batch", "BatchBaseline") if row.startswith("Batch") else "GroupMixedBaseline"
        r = {"tokens_per_second": crl[row]["tokens_per_second"]}
        for k in ("roofline_fraction", "decode_ms_per_step", "prefill_ms", "graphs_captured"):
            if k in crl[row]:
                r[k] = crl[row][k]
        if baseline_name in crl:
            r["baseline_tokens_per_second"] = crl[baseline_name]["tokens_per_second"]
            r["speedup_vs_baseline"] = r["tokens_per_second"] / r["baseline_tokens_per_second"]
        rows[row] = r
    if not args.skip_hf:
        hf = time_hf(args.model_dir, args)
        report["transformers_generate"] = hf
        for row, r in rows.items():
            if row in hf:
                r["transformers_tokens_per_second"] = hf[row]["tokens_per_second"]
                r["speedup_vs_transformers"] = r["tokens_per_second"] / hf[row]["tokens_per_second"]
    if args.hf_static:
        report["transformers_static_compiled_batch1"] = time_hf_static(args.model_dir, args)
    for row, (key, goal) in GOALS.items():
        if row in rows and key in rows[row]:
            rows[row]["goal"] = f"{key} >= {goal}"
            rows[row]["goal_met"] = rows[row][key] >= goal
    report["rows"] = rows
    with open(os.path.join(args.out, "generate_bench.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(main())
