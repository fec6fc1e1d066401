#!/usr/bin/env python3
"""The field's telemetry per step (ctest job_telemetry, CPU; issue 43, row 9), as a user meets it
in results.h5 and the job's log, on the tiny CPU model:
  - a crl stage with a KL reference (grpo.kl > 0) and two updates per batch, whose first step's
    group holds a correct program, one that does not compile and the model's own text: /steps has
    entropy > 0, a finite KL >= 0, clip_fraction, completion lengths and advantage statistics in
    range, zero_advantage_fraction 0 there (the rewards differ); the progress line shows entropy
    and kl;
  - a crl stage without a reference (kl NaN, as documented) whose rollouts are all format_error
    (the tiny model writes no program): every group is zero-advantage, and after 5 such steps in a
    row the job warns that they learnt nothing; the warning is in /meta warnings.
Usage: telemetry_test.py --crl build/apps/crl/crl --work DIR
"""
import json
import math
import os
import struct
import subprocess
import sys

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

JOB = job_head("telemetry", "level1/019_relu", 'scale: small, trials: 1, time_budget: 0.1, call_timeout: 10, max_relative_ci: 10') + f"""stages:
  - kind: crl
    steps: 1
    batch: 1
    G: 3
    K: 0
    lr: 1.0e-3
    updates_per_batch: 2
    grpo: {{kl: 0.05}}
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
    planted:
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/same_as_reference.crl}}
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/does_not_compile.crl}}
  - kind: crl
    steps: 5
    batch: 1
    G: 2
    K: 0
    lr: 1.0e-4
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
"""
COLUMNS = ("entropy", "kl", "clip_fraction", "completion_tokens_mean", "completion_tokens_max", "advantage_mean",
           "advantage_std", "zero_advantage_fraction")


def event_scalars(logdir):
    """(tag, step) -> value of every scalar in the event files under logdir, later files winning, and
    the purge steps they start with. TFRecord framing read here only to check what the writer wrote."""
    from tensorboardX.proto import event_pb2
    values, purges = {}, []
    for name in sorted(os.listdir(logdir)):
        with open(os.path.join(logdir, name), "rb") as f:
            data = f.read()
        offset = 0
        while offset < len(data):
            length = struct.unpack("<Q", data[offset:offset + 8])[0]
            event = event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            if event.HasField("session_log") and event.session_log.status == event_pb2.SessionLog.START:
                purges.append(event.step)
            for v in event.summary.value:
                values[(v.tag, event.step)] = v.simple_value
    return values, purges


def check_tensorboard(args, run_dir, rows):
    """tools/analysis/crl_tensorboard.py: the file's steps as TensorBoard scalars; a second start
    purges what the first wrote."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        print("tensorboardX is not installed: crl_tensorboard not checked (tools/setup.sh installs it)")
        return
    logdir = os.path.join(args.work, "tensorboard")
    tool = [sys.executable, os.path.join(REPO, "tools", "analysis", "crl_tensorboard.py"),
            os.path.join(run_dir, "results.h5"), "--logdir", logdir]
    for _ in range(2):
        r = subprocess.run(tool, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        if r.returncode != 0 or "6 step(s) written" not in r.stdout:
            fail(f"crl_tensorboard: exit {r.returncode}: {r.stdout}")
    values, purges = event_scalars(logdir)
    if purges != [0, 0]:
        fail(f"each start of crl_tensorboard should purge from step 0: {purges}")
    for step in range(6):
        got = values.get(("policy/entropy", step))
        if got is None or abs(got - rows["entropy"][step]) > 1e-4 * abs(rows["entropy"][step]):
            fail(f"policy/entropy at step {step}: {got}, /steps has {rows['entropy'][step]}")
    if ("policy/kl", 0) not in values or ("policy/kl", 1) in values:
        fail("policy/kl should be at step 0 (grpo.kl 0.05) and not at step 1 (NaN: not measured)")
    if ("train/loss", 3) not in values or ("advantages/zero_advantage_groups", 3) not in values:
        fail(f"train/loss or advantages at step 3 missing: {sorted({t for t, _ in values})}")


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    import h5py  # present: prepare() checked

    job = os.path.join(args.work, "telemetry.yaml")
    with open(job, "w") as f:
        f.write(JOB)
    env = dict(os.environ)
    env.update(MPIRUN_ENV)
    run_dir = os.path.join(args.work, "telemetry")
    command = [args.mpirun, "-np", "2", "--oversubscribe", args.crl, "run", job, "--model", model, "--run-dir", run_dir]
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    out = p.stdout
    print(out)
    if p.returncode != 0:
        fail(f"exit {p.returncode}")

    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps = f["steps"]
        missing = [c for c in COLUMNS if c not in steps]
        if missing:
            fail(f"/steps lacks {missing}")
        rows = {c: [float(x) for x in steps[c][:]] for c in COLUMNS}
        warnings = json.loads(f["meta"].attrs.get("warnings", "[]"))
    if len(rows["entropy"]) != 6:
        fail(f"{len(rows['entropy'])} /steps rows, not 6")
    first = {c: rows[c][0] for c in COLUMNS}
    print("step 0:", first)
    if not (first["entropy"] > 0 and math.isfinite(first["entropy"])):
        fail(f"step 0: entropy {first['entropy']} is not finite and > 0")
    if not (math.isfinite(first["kl"]) and first["kl"] >= 0):
        fail(f"step 0 (grpo.kl 0.05): kl {first['kl']} is not finite and >= 0")
    if not 0 <= first["clip_fraction"] <= 1:
        fail(f"step 0: clip_fraction {first['clip_fraction']} not in [0, 1]")
    if first["zero_advantage_fraction"] != 0:
        fail(f"step 0: a group with a correct and a failing program has zero_advantage_fraction {first['zero_advantage_fraction']}")
    if not (first["advantage_std"] > 0 and abs(first["advantage_mean"]) < 1e-6 and
            0 < first["completion_tokens_mean"] <= first["completion_tokens_max"]):
        fail(f"step 0: advantage or length statistics out of range: {first}")
    for i in range(1, 6):
        if not (rows["entropy"][i] > 0 and 0 <= rows["clip_fraction"][i] <= 1):
            fail(f"step {i}: entropy {rows['entropy'][i]} or clip_fraction {rows['clip_fraction'][i]} out of range")
        if not math.isnan(rows["kl"][i]):
            fail(f"step {i}: no KL reference (grpo.kl 0), yet kl is {rows['kl'][i]}, not NaN")
        if rows["zero_advantage_fraction"][i] != 1:
            fail(f"step {i}: all format_error, yet zero_advantage_fraction {rows['zero_advantage_fraction'][i]}")
        if rows["completion_tokens_max"][i] > 8:
            fail(f"step {i}: completion_tokens_max {rows['completion_tokens_max'][i]} > max_new_tokens 8")

    progress = [l for l in out.splitlines() if "[crl] step 0 " in l]
    if not progress or ", entropy " not in progress[0] or ", kl " not in progress[0]:
        fail(f"step 0's progress line does not show entropy and kl: {progress}")
    said = "crl steps 1 to 5: in every group all rewards were equal (zero advantage)"
    if said not in out or not any(said in w for w in warnings):
        fail(f"'{said}' is not in the log and /meta warnings ({warnings})")

    # crl report draws them per step.
    report = os.path.join(args.work, "report")
    r = subprocess.run([args.crl, "report", os.path.join(run_dir, "results.h5"), "--out", report, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"crl report: exit {r.returncode}: {r.stdout[-2000:]}")
    plots = json.loads(r.stdout)["page"]["plots"]
    for kind in ("loss", "lr", "policy", "advantages", "lengths"):
        name = f"results_{kind}"
        if not any(p.endswith(name) and os.path.exists(os.path.join(report, "plots", p + ".png")) for p in plots):
            fail(f"crl report drew no {kind} plot: {plots}")

    check_tensorboard(args, run_dir, rows)

    # A results file of an older crl (its /steps without these columns) in a run folder without a
    # checkpoint: the job starts over on it, adding the columns; the old rows read NaN there.
    old_dir = os.path.join(args.work, "older")
    os.makedirs(old_dir)
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as src, h5py.File(os.path.join(old_dir, "results.h5"), "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for name in src:
            src.copy(src[name], dst, name=name)
        steps = dst["steps"]
        for c in COLUMNS:
            del steps[c]
        steps.attrs["crl_columns"] = [c for c in steps.attrs["crl_columns"] if c not in COLUMNS]
    sys.path.insert(0, os.path.join(REPO, "tools", "analysis"))
    import crl_results
    older = crl_results.load(os.path.join(old_dir, "results.h5")).steps
    if len(older) != 6 or not all(c in older and older[c].isna().all() for c in COLUMNS):
        fail("crl_results does not read the older file's /steps with the telemetry columns as NaN")
    command[-1] = old_dir
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"a run on a results file without the telemetry columns: exit {p.returncode}")
    with h5py.File(os.path.join(old_dir, "results.h5"), "r") as f:
        entropy = [float(x) for x in f["steps"]["entropy"][:]]
        superseded = [bool(x) for x in f["steps"]["superseded"][:]]
    if len(entropy) != 12 or not all(math.isnan(x) for x in entropy[:6]) or not all(x > 0 for x in entropy[6:]):
        fail(f"entropy over the older rows and the new ones: {entropy}")
    if superseded != [True] * 6 + [False] * 6:
        fail(f"superseded: {superseded}")
    print("PASS: /steps telemetry in range, entropy and kl on the progress line, a stage that learnt nothing warned of; "
          "a file without the columns gains them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
