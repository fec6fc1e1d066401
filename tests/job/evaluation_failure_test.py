#!/usr/bin/env python3
"""A job whose evaluation fails for everything stops with a clear error and loses nothing (ctest
job_evaluation_failure, CPU; docs/training.md, "Evaluation that fails for everything").
crl-worker is replaced (CRL_WORKER) by a stand-in that exits at once, as every GPU worker did when
the sandbox's first filter kept the H200's CUDA driver from starting: each program's verdict is
internal_error. With eval.max_failed_steps 1 the job must
  - exit non-zero (4, crl's failure) after its first crl step, saying "evaluation failed" and
    quoting the stand-in's message (the cause, as the evaluator saw it), its progress line
    counting the step's internal errors;
  - have written that step's rows (every judged program internal_error) and a checkpoint;
then the same command with the real crl-worker resumes after that step and completes.
Usage: evaluation_failure_test.py --crl build/apps/crl/crl --work DIR
"""
import os
import stat
import subprocess
import sys

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

STEPS = 2
JOB = job_head("evaluation-failure", "level1/019_relu", 'scale: small, trials: 1, time_budget: 0.1, call_timeout: 10, max_failed_steps: 1') + f"""stages:
  - kind: crl
    steps: {STEPS}
    batch: 1
    G: 2
    K: 0
    lr: 1.0e-4
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
    planted:
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/same_as_reference.crl}}
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/same_as_reference.crl}}
"""
STAND_IN_SAYS = "crl-worker stand-in: CUDA did not start (error 304)"


def run(args, job, model, run_dir, env):
    command = [args.mpirun, "-np", "2", "--oversubscribe", args.crl, "run", job, "--model", model, "--run-dir", run_dir]
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout)
    return p


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    import h5py  # present: prepare() checked
    job = os.path.join(args.work, "job.yaml")
    with open(job, "w") as f:
        f.write(JOB)
    stand_in = os.path.join(args.work, "broken-worker")
    with open(stand_in, "w") as f:
        f.write(f"#!/bin/sh\necho '{STAND_IN_SAYS}' >&2\nexit 1\n")
    os.chmod(stand_in, os.stat(stand_in).st_mode | stat.S_IXUSR)
    run_dir = os.path.join(args.work, "run")
    env = dict(os.environ)
    env.update(MPIRUN_ENV)

    broken = run(args, job, model, run_dir, dict(env, CRL_WORKER=stand_in))
    if broken.returncode == 0:
        fail("the job with a broken worker exited 0")
    if "evaluation failed" not in broken.stdout:
        fail("the job's output does not say 'evaluation failed'")
    if STAND_IN_SAYS not in broken.stdout:
        fail("the job's message does not quote the worker's own words")
    if "internal_error 2" not in broken.stdout:
        fail("the step's progress line does not count its internal errors")
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps = list(f["steps/step"][:])
        if steps != [0]:
            fail(f"the broken run's /steps are {steps}, not [0]")
        if int(f["steps/n_internal_error"][0]) != 2:
            fail(f"step 0 has {int(f['steps/n_internal_error'][0])} internal errors, not 2")
        statuses = list(f["rollouts/status"].asstr()[:])
        if statuses != ["internal_error", "internal_error"]:
            fail(f"the broken run's rollouts are {statuses}")
    checkpoints = os.listdir(os.path.join(run_dir, "checkpoints"))
    if not checkpoints:
        fail("the broken run wrote no checkpoint")
    print("broken run: exit", broken.returncode, "checkpoints", sorted(checkpoints))

    fixed = run(args, job, model, run_dir, env)
    if fixed.returncode != 0:
        fail(f"the resumed run exited {fixed.returncode}")
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps = list(f["steps/step"][:])
        if steps != list(range(STEPS)):
            fail(f"after the resume /steps are {steps}, not {list(range(STEPS))}")
    print("PASS: the job stopped at its first failed step, checkpointed, and resumed to the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
