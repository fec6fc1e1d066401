#!/usr/bin/env python3
"""The default job end to end (ctest default_job, CPU, in CI): `crl run` with no job file (it makes
the tiny model, starts itself under mpirun with 2 ranks, runs crl report), jobs/default.yaml as it
is (SHORT shortens it through --set when it is non-empty). Then, from the results file (h5py):
  - /steps holds the sft, selftrain and crl stages; the report page was written and printed;
  - stage 3 learns: the mean reward of its last LAST_STEPS steps' rollouts exceeds that of its
    first step (where stage 3 began: the policy before any RL update) by more than MARGIN_SE
    standard errors of that difference (and by MIN_RISE at least).
Why that margin: a step's reward is the mean over batch x G rollouts whose rewards (a speedup,
0 for a failure) vary a lot; a policy that does not learn gives the two windows the same expected
mean, so their difference is noise of standard error sqrt(var_first/n_first + var_last/n_last)
(rollouts taken as independent; the windows hold every task once per step, so the task draw adds
nothing). 3 standard errors leave a non-learning run about a 0.1% chance to pass; the absolute
floor keeps a run with almost no spread (every reward 0) from passing on a tiny SE. The first
window is one step because the policy learns within two: a window of the first steps already
holds much of the rise.
Measured (2026-12-01, 2-core machine): before reused verdicts were audited, 1.029 at stage 3's first
step (16 rollouts), 1.804 over its last four (64), standard error 0.190 (4.1 SE), 2.7 min; with the
audits, 1.077 -> 1.860 idle (5.9 min) and 1.126 -> 1.991 in a parallel ctest (398 s). 2026-12-02, host
sections by clang++: 0.51 -> 2.16 idle (5.3 min), 0.529 -> 2.255 (SE 0.188) in a fresh clone's ctest.
Also: --set with a key the job file lacks is refused (exit 3) naming it.
Usage: default_job_test.py --crl build/apps/crl/crl --work DIR
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARGIN_SE = 3.0
MIN_RISE = 0.2
# No shortening: with each program judged once (eval.reuse_verdicts) the whole job takes ~6 min,
# and fewer RL steps leave too little of the rise to clear 3 standard errors (12 steps: ~3.0).
SHORT = []
LAST_STEPS = 4  # crl steps at the end compared with the first


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def mean_and_var(values):
    m = sum(values) / len(values)
    return m, sum((v - m) ** 2 for v in values) / max(1, len(values) - 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crl", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import h5py
    except ImportError:
        print("SKIP: h5py is not installed in", sys.executable)
        return 0
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    run_dir = os.path.join(args.work, "run")

    env = dict(os.environ)
    if os.geteuid() == 0:  # MPI's singleton start refuses root unless told
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    bad = subprocess.run([args.crl, "run", os.path.join(REPO, "jobs", "default.yaml"), "--run-dir", os.path.join(args.work, "bad"),
                          "--set", "stages.7.steps=1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                         env=env)
    if bad.returncode != 3 or "stages.7.steps=1" not in bad.stdout:
        fail(f"--set stages.7.steps=1 (the job has 3 stages): exit {bad.returncode}, output {bad.stdout[-1500:]}")

    command = [args.crl, "run", "--run-dir", run_dir]
    for s in SHORT:
        command += ["--set", s]
    start = time.time()
    job = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3500)
    # The whole output to a file, its end here: CI shows a failing test's output cut in the middle,
    # and the end is where a failure is named.
    log_path = os.path.join(args.work, "job.log")
    with open(log_path, "w") as log:
        log.write(job.stdout)
    lines = job.stdout.splitlines()
    print(f"crl run's output: {len(lines)} lines in {log_path}; the last 60:")
    print("\n".join(lines[-60:]))
    print(f"crl run took {time.time() - start:.1f} s")
    if job.returncode != 0:
        fail(f"crl run exited {job.returncode}")
    page = os.path.join(run_dir, "report", "index.html")
    if not os.path.exists(page) or page not in job.stdout:
        fail(f"the report page {page} was not written or not printed")

    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        stages = list(f["steps/stage"].asstr()[:])
        if sorted(set(stages)) != ["crl", "selftrain", "sft"]:
            fail(f"/steps stages are {sorted(set(stages))}")
        crl_steps = sorted({int(s) for s, st in zip(f["steps/step"][:], stages) if st == "crl"})
        if len(crl_steps) < 1 + LAST_STEPS:
            fail(f"stage 3 ran {len(crl_steps)} steps, fewer than 1 + {LAST_STEPS}")
        r = f["rollouts"]
        step = list(r["step"][:])
        status = list(r["status"].asstr()[:])
        reward = list(r["reward"][:])
    first_steps, last_steps = set(crl_steps[:1]), set(crl_steps[-LAST_STEPS:])
    included = [i for i in range(len(step)) if status[i] != "internal_error"]
    first = [reward[i] for i in included if step[i] in first_steps]
    last = [reward[i] for i in included if step[i] in last_steps]
    if not first or not last:
        fail("stage 3's first or last steps have no rollouts")
    m1, v1 = mean_and_var(first)
    m2, v2 = mean_and_var(last)
    se = math.sqrt(v1 / len(first) + v2 / len(last))
    rise = m2 - m1
    print(f"stage 3 reward: first step {m1:.3f} (n={len(first)}), last {LAST_STEPS} steps {m2:.3f} (n={len(last)}), "
          f"rise {rise:.3f}, standard error {se:.3f}; ok programs {status.count('ok')} of {len(status)}")
    if rise <= max(MARGIN_SE * se, MIN_RISE):
        fail(f"stage 3 did not learn clearly: the reward rose {rise:.3f}, needed more than {max(MARGIN_SE * se, MIN_RISE):.3f}")
    print("ok: the default job learns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
