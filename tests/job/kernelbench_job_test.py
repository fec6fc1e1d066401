#!/usr/bin/env python3
"""A job on KernelBench-format programs (ctest job_kernelbench, CPU; issue 42, item 6), as a user
who brings the field's data meets it:
  - `crl data import` of {task, code} lines (a correct ModelNew and a wrong one) keeps the correct
    one as KernelBench-format SFT data;
  - a job with `program_format: kernelbench` and `kernelbench:` (a KernelBench-style folder, here a
    stand-in module written by this test) runs stage 1 (sft) on that data and stage 3 (crl), whose
    prompts show the task's KernelBench module and whose planted ModelNew programs are judged as
    KernelBench-format candidates: the correct one ok, the wrong one mismatch;
  - `program_format: kernelbench` without `kernelbench:` is refused before any rank starts (exit 3).
Usage: kernelbench_job_test.py --crl build/apps/crl/crl --work DIR
"""
import json
import os
import subprocess

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

TASK = "level1/019_relu"
# KernelBench's layout, with a module this test writes (the module a KernelBench checkout holds for
# the task: a ReLU taking no constructor arguments).
REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
"""
GOOD = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""
WRONG = GOOD.replace("torch.clamp_min(x, 0.0)", "torch.abs(x)")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def import_data(args):
    release = os.path.join(args.work, "release.jsonl")
    write(release, "".join(json.dumps({"task": TASK, "code": code, "id": name}) + "\n" for name, code in (("good", GOOD), ("wrong", WRONG))))
    sft = os.path.join(args.work, "sft.jsonl")
    r = subprocess.run([args.crl, "data", "import", release, "--out", sft, "--backend", "cpu", "--trials", "2", "--time-budget",
                        "0.2", "--max-relative-ci", "10", "--json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail(f"crl data import: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    report = json.loads(r.stdout)
    if report["kept"] != 1 or [l["status"] for l in report["lines"]] != ["ok", "mismatch"]:
        fail(f"crl data import kept {report['kept']}: {report['lines']}")
    with open(sft) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    if len(lines) != 1 or lines[0]["format"] != "kernelbench" or lines[0]["id"] != "good":
        fail(f"the imported SFT data: {lines}")
    return sft


def job_text(args, sft, with_checkout=True):
    good, wrong = os.path.join(args.work, "good.py"), os.path.join(args.work, "wrong.py")
    write(good, GOOD)
    write(wrong, WRONG)
    checkout = f"kernelbench: {os.path.join(args.work, 'kb')}\n" if with_checkout else ""
    return job_head("kernelbench", TASK, "scale: small, trials: 2, time_budget: 0.1, call_timeout: 10, max_relative_ci: 10") + \
        "program_format: kernelbench\n" + checkout + f"""stages:
  - kind: sft
    data: {sft}
    epochs: 1
    batch: 1
    lr: 1.0e-3
  - kind: crl
    steps: 1
    batch: 1
    G: 3
    K: 0
    lr: 1.0e-4
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
    planted:
      - {{task: {TASK}, file: {good}}}
      - {{task: {TASK}, file: {wrong}}}
"""


def run_job(args, model, name, text, expect):
    path = os.path.join(args.work, f"{name}.yaml")
    write(path, text)
    r = subprocess.run([args.crl, "run", path, "--model", model, "--run-dir", os.path.join(args.work, name)],
                       env={**os.environ, **MPIRUN_ENV}, capture_output=True, text=True, timeout=900)
    if r.returncode != expect:
        fail(f"crl run {name}: exit {r.returncode}, expected {expect}\n{r.stdout}\n{r.stderr}")
    return r


def check_results(run_dir):
    import h5py
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        r = f["rollouts"]
        status = list(r["status"].asstr()[:])
        sample = list(r["sample"][:])
        ids = list(r["rollout_id"][:])
        by_sample = {sample[i]: i for i in range(len(ids)) if r["task"].asstr()[i] == TASK}
        if status[by_sample[0]] != "ok" or status[by_sample[1]] != "mismatch":
            fail(f"planted ModelNew programs got {status[by_sample[0]]} and {status[by_sample[1]]}, expected ok and mismatch")
        prompt_ids = list(f["text/prompts/id"][:])
        prompt = f["text/prompts/text"].asstr()[prompt_ids.index(ids[by_sample[0]])]
        if "The reference module (KernelBench's `Model`):\n\n```python\nimport torch" not in prompt or "class ModelNew" not in prompt:
            fail(f"the prompt does not show the task's KernelBench module and ask for ModelNew:\n{prompt}")
        program_format = f["meta"].attrs.get("program_format")
        if (program_format.decode() if isinstance(program_format, bytes) else program_format) != "kernelbench":
            fail(f"/meta program_format is {program_format!r}, not kernelbench: a report could not tell its rollouts' kind")


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    write(os.path.join(args.work, "kb", "KernelBench", "level1", "19_ReLU.py"), REFERENCE)
    sft = import_data(args)
    run_job(args, model, "kernelbench", job_text(args, sft), 0)
    check_results(os.path.join(args.work, "kernelbench"))
    refused = run_job(args, model, "no_checkout", job_text(args, sft, with_checkout=False), 3)
    if "program_format kernelbench needs 'kernelbench'" not in refused.stderr + refused.stdout:
        fail(f"the refusal does not say what is missing:\n{refused.stderr}")
    print("kernelbench job: imported data trained on, ModelNew programs judged, prompts show the module")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
