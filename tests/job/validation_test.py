#!/usr/bin/env python3
"""Held-out validation in a job (ctest job_validation, CPU; issue 43, item 4), as a user meets it:
  - a job with `validation:` (one held-out task, every 2 steps, G 2) and a crl stage of 3 steps on
    another task: /validation holds 2 validations (after step 1 and after the stage's last, step 2) x
    1 task x G 2, of the held-out task only and labelled with the step they followed; /rollouts holds
    no held-out task (it is never sampled for training, nor rewarded); the log has the validation line;
  - `crl report` keeps them apart: the level tables have a split column with trained-on and held-out
    rows, summary.json levels_by_split has both, tasks.csv names each task's split, and the page has
    the per-validation table;
  - a job whose held-out task is also a training task is refused before any rank starts (exit 3,
    naming the task, the key and the file's line); so is a bad `validation` key.
Usage: validation_test.py --crl build/apps/crl/crl --work DIR
"""
import csv
import json
import os
import subprocess
import sys
import time

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

TRAIN, HELD_OUT = "level1/019_relu", "level1/021_sigmoid"


def job_text(validation):
    return job_head("validation", TRAIN, 'scale: small, trials: 1, time_budget: 0.1, call_timeout: 10, max_relative_ci: 10') + f"""stages:
  - kind: crl
    steps: 3
    batch: 1
    G: 2
    K: 0
    lr: 1.0e-4
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
    planted:
      - {{task: {TRAIN}, file: {REPO}/tests/data/eval/relu/same_as_reference.crl}}
{validation}"""


def run_job(args, model, name, validation, expect):
    path = os.path.join(args.work, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(job_text(validation))
    started = time.monotonic()
    r = subprocess.run([args.crl, "run", path, "--model", model, "--run-dir", os.path.join(args.work, name)],
                       env={**os.environ, **MPIRUN_ENV}, capture_output=True, text=True, timeout=900)
    if r.returncode != expect:
        fail(f"crl run {name}: exit {r.returncode}, expected {expect}\n{r.stdout}\n{r.stderr}")
    return r, path, time.monotonic() - started


def check_rows(run_dir, log):
    import h5py
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        v_tasks = list(f["validation/task"].asstr()[:])
        v_steps = f["validation/step"][:].tolist()
        v_ids = f["validation/rollout_id"][:].tolist()
        r_tasks = set(f["rollouts/task"].asstr()[:])
        completions = set(f["text/validation_completions/id"][:].tolist())
    if v_tasks != [HELD_OUT] * 4 or sorted(v_steps) != [1, 1, 2, 2]:
        fail(f"/validation: tasks {v_tasks}, steps {v_steps}; expected 2 validations (after steps 1 and 2) x G 2 of {HELD_OUT}")
    if v_ids != [0, 1, 2, 3] or completions != set(v_ids):
        fail(f"/validation ids {v_ids} and their completions {completions}")
    if r_tasks != {TRAIN}:
        fail(f"/rollouts holds {r_tasks}: a held-out task was sampled for training")
    if log.count("[validation] after crl step") != 2:
        fail(f"the log has not two validation lines:\n{log}")


def check_report(args, run_dir):
    out = os.path.join(args.work, "report")
    r = subprocess.run([args.crl, "report", os.path.join(run_dir, "results.h5"), "--out", out, "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"crl report: exit {r.returncode}\n{r.stderr}")
    summary = json.loads(r.stdout)
    entry = summary["inputs"][0]
    splits = entry.get("levels_by_split", {})
    if set(splits) != {"trained-on", "held-out"}:
        fail(f"summary.json levels_by_split: {list(splits)}")
    held, trained = splits["held-out"]["eager"]["level1"], splits["trained-on"]["eager"]["level1"]
    if held["tasks"] != 1 or held["attempts"] != 4 or trained["tasks"] != 1 or trained["attempts"] != 6:
        fail(f"held-out {held['tasks']} task(s), {held['attempts']} attempts; trained-on {trained['tasks']}, {trained['attempts']}")
    if entry["levels"]["eager"]["level1"]["attempts"] != 6:
        fail(f"'levels' mixes the held-out attempts into the trained-on ones: {entry['levels']}")
    with open(os.path.join(out, "tasks.csv")) as f:
        split_of = {row["task"]: row["split"] for row in csv.DictReader(f)}
    if split_of != {TRAIN: "trained-on", HELD_OUT: "held-out"}:
        fail(f"tasks.csv splits: {split_of}")
    with open(os.path.join(out, "summary.md")) as f:
        md = f.read()
    if "| input | split | baseline | level |" not in md or "| held-out |" not in md:
        fail("summary.md's level tables have no split column with held-out rows")
    if not any(t.endswith("_validation") for t in summary["page"]["tables"]):
        fail(f"no per-validation table on the page: {summary['page']['tables']}")


def check_refused(args, model):
    both = f"validation: {{tasks: {{ids: [{TRAIN}]}}, every: 1}}\n"
    r, path, _ = run_job(args, model, "both", both, 3)
    line = job_text(both).splitlines().index(both.strip()) + 1
    for named in (TRAIN, "validation.tasks", f"{path}:{line}"):
        if named not in r.stderr:
            fail(f"a held-out task that is trained on: the error does not name {named!r}:\n{r.stderr}")
    r, _, _ = run_job(args, model, "bad", f"validation: {{tasks: {{ids: [{HELD_OUT}]}}, every: 0}}\n", 3)
    if "validation.every" not in r.stderr:
        fail(f"validation.every 0: {r.stderr}")


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    r, _, seconds = run_job(args, model, "run", f"validation: {{tasks: {{ids: [{HELD_OUT}]}}, every: 2, G: 2, "
                                                "sampling: {temperature: 1.0, max_new_tokens: 8}}\n", 0)
    print(f"job with validation: {seconds:.1f} s")
    run_dir = os.path.join(args.work, "run")
    check_rows(run_dir, r.stdout + r.stderr)
    check_report(args, run_dir)
    check_refused(args, model)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
