#!/usr/bin/env python3
"""A checkpoint of `crl run` is a model folder Hugging Face's tools load whole (ctest
job_hf_checkpoint, CPU; issue 43, item 5). A tiny model from `crl init-model`, one SFT job of one
rank started by hand (`crl run JOB --model DIR --run-dir RUN`), then on its checkpoint folder:
  - it holds the model folder's tokenizer files (tokenizer.json, tokenizer_config.json,
    generation_config.json), byte for byte;
  - `crl generate --model CKPT --prompt TEXT` accepts it (a greedy token, with its log-probability);
  - transformers' AutoTokenizer has the model's vocabulary (not the 1-token tokenizer it made of a
    checkpoint without tokenizer files) and encodes TEXT to crl's ids, and AutoModelForCausalLM
    loads the same folder: logits of shape (1, tokens, vocab) whose greedy token and its
    log-probability are crl's.
Skips, saying why, where the test venv lacks h5py, torch or transformers (tools/setup.sh installs them).
Usage: hf_checkpoint_test.py --crl build/apps/crl/crl --work DIR
"""
import glob
import json
import os
import subprocess
import sys

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

JOB = job_head("hf-checkpoint", "level1/019_relu, level1/021_sigmoid", None) + f"""stages:
  - kind: sft
    data: {REPO}/jobs/data/ci_sft.jsonl
    epochs: 1
    batch: 2
    lr: 1.0e-3
"""
TEXT = "__global__ void relu(const float* x, float* y) { y[i] = x[i] > 0.f ? x[i] : 0.f; }"
COPIED = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"SKIP: {sys.executable} cannot import torch and transformers ({e}); tools/setup.sh installs them")
        return 0

    job = os.path.join(args.work, "job.yaml")
    with open(job, "w") as f:
        f.write(JOB)
    run_dir = os.path.join(args.work, "run")
    env = dict(os.environ, **MPIRUN_ENV)
    p = subprocess.run([args.crl, "run", job, "--model", model, "--run-dir", run_dir], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout)
    if p.returncode != 0:
        fail(f"crl run exited {p.returncode}")
    checkpoints = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step-*")))
    if not checkpoints:
        fail(f"no checkpoint in {run_dir}/checkpoints")
    ckpt = checkpoints[-1]

    # 1. The model folder's tokenizer files, as they are, and in the DONE manifest.
    done = json.loads(read_bytes(os.path.join(ckpt, "DONE")))
    for name in COPIED:
        path = os.path.join(ckpt, name)
        if not os.path.isfile(path):
            fail(f"{ckpt} lacks {name}: {sorted(os.listdir(ckpt))}")
        if read_bytes(path) != read_bytes(os.path.join(model, name)):
            fail(f"{path} differs from the model folder's")
        if name not in done["sha256"]:
            fail(f"{name} is not hashed in {ckpt}/DONE")

    # 2. crl generate takes the checkpoint folder as its model: crl's ids of TEXT, one greedy token.
    g = subprocess.run([args.crl, "generate", "--model", ckpt, "--prompt", TEXT, "--max-new-tokens", "1", "--temperature", "0",
                        "--ignore-eos", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if g.returncode != 0:
        fail(f"crl generate --model {ckpt} exited {g.returncode}: {g.stderr}")
    completion = json.loads(g.stdout)["completions"][0]
    crl_ids, crl_token, crl_logprob = completion["prompt_tokens"], completion["tokens"][0], completion["model_logprobs"][0]

    # 3. transformers on the same folder: tokenizer and model.
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(ckpt)
    model_tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    if len(hf_tokenizer) != len(model_tokenizer) or len(hf_tokenizer) < 300:
        fail(f"AutoTokenizer of the checkpoint has {len(hf_tokenizer)} tokens, the model folder's {len(model_tokenizer)}")
    hf_ids = hf_tokenizer(TEXT)["input_ids"]
    if hf_ids != crl_ids:
        fail(f"AutoTokenizer encodes the text to {hf_ids}, crl to {crl_ids}")
    if hf_tokenizer.eos_token != "<|endoftext|>" or hf_tokenizer.decode(hf_ids) != TEXT:
        fail(f"AutoTokenizer's eos is {hf_tokenizer.eos_token!r}, or it does not decode the text back")
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    vocab = json.loads(read_bytes(os.path.join(ckpt, "config.json")))["vocab_size"]
    with torch.no_grad():
        logits = hf_model(torch.tensor([hf_ids])).logits
    if tuple(logits.shape) != (1, len(hf_ids), vocab):
        fail(f"AutoModelForCausalLM's logits have shape {tuple(logits.shape)}, not (1, {len(hf_ids)}, {vocab})")
    log_probs = torch.log_softmax(logits[0, -1].double(), dim=-1)
    hf_token = int(torch.argmax(log_probs))
    if hf_token != crl_token or abs(float(log_probs[crl_token]) - crl_logprob) > 1e-4:
        fail(f"greedy next token: transformers {hf_token} (log-prob {float(log_probs[hf_token]):.6f}), "
             f"crl {crl_token} ({crl_logprob:.6f})")
    print(f"{ckpt}: tokenizer files copied; crl generate and transformers (tokenizer of {len(hf_tokenizer)}, "
          f"logits {tuple(logits.shape)}) agree on {len(hf_ids)} ids and the next token {crl_token}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
