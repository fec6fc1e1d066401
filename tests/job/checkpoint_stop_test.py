#!/usr/bin/env python3
"""A stop that arrives while the job's final checkpoint is written (issue 41; ctest
job_checkpoint_stop, CPU). jobs/ci.yaml runs under mpirun -np 4 with tests/kill's LD_PRELOAD shim:
  1. counting the calls that change files under RUN/checkpoints (rank 0 writes them: the sft
     stage's end checkpoint, then the crl stage's, the job's final one);
  2. again in a fresh run folder, the shim sending SIGTERM to rank 0 at a call three quarters
     through (inside the final checkpoint, as the log's step proves): the job must exit 5 and log
     `stopped at crl step 3 (SIGTERM)` (it once finished with exit 0, the stop unseen);
  3. the same command again: it finds the job complete (exit 0), and /meta `restarts` equals the
     largest restart of /steps and of /rollouts (a resume that wrote no row once made it 1 beside
     rows of restart 0).
Usage: checkpoint_stop_test.py --crl build/apps/crl/crl --shim build/tests/kill/libcrl_kill_shim.so --work DIR
"""
import glob
import os
import subprocess
import sys

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail

JOB = os.path.join(REPO, "jobs", "ci.yaml")
FINAL_STEP = 3  # jobs/ci.yaml: sft steps 0-1, crl steps 2-3


def run_job(args, model, run_dir, shim_env=None):
    env = dict(os.environ)
    env.update(MPIRUN_ENV)
    env.update(shim_env or {})
    command = [args.mpirun, "-np", "4", "--oversubscribe", args.crl, "run", JOB, "--model", model, "--run-dir", run_dir]
    job = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    return job.returncode, job.stdout


def shim_env(args, run_dir, **settings):
    """The shim's environment; it watches RUN/checkpoints, which must exist when each process starts."""
    os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
    env = {"LD_PRELOAD": os.path.abspath(args.shim), "CRL_KILL_DIR": os.path.join(run_dir, "checkpoints")}
    env.update({k: str(v) for k, v in settings.items()})
    return env


def main():
    prepared = job_test_setup.prepare(quiet=True, add_arguments=lambda ap: ap.add_argument("--shim", required=True))
    if prepared is None:
        return 0
    args, model = prepared
    import h5py  # present: prepare() checked

    # 1. The kill points: every process writes its count; rank 0's is the largest (the others write none).
    counted = os.path.join(args.work, "counted")
    counts = os.path.join(args.work, "counts")
    os.makedirs(counts)
    code, output = run_job(args, model, counted, shim_env(args, counted, CRL_KILL_AT=0,
                                                         CRL_KILL_COUNT_FILE=os.path.join(counts, "c.%p")))
    if code != 0:
        fail(f"the counting run exited {code}: {output[-3000:]}")
    total = max(int(open(f).read()) for f in glob.glob(os.path.join(counts, "c.*")))
    # Two checkpoints of the same files (keep 2: none pruned): the second half of the calls is the final one's.
    at = total - total // 4
    print(f"{total} file-changing calls under checkpoints/; SIGTERM at call {at}")

    # 2. SIGTERM to rank 0 while it writes the final checkpoint.
    run_dir = os.path.join(args.work, "run")
    code, output = run_job(args, model, run_dir, shim_env(args, run_dir, CRL_KILL_AT=at, CRL_KILL_SIGNAL=15))
    print(output[-4000:])
    stopped = f"stopped at crl step {FINAL_STEP} (SIGTERM)"
    if code != 5 or stopped not in output:
        fail(f"SIGTERM at call {at} of {total}: exit {code} (expected 5), '{stopped}' {'' if stopped in output else 'not '}logged")

    # 3. The same command finds the job complete; /meta's restart count is the rows'.
    code, output = run_job(args, model, run_dir)
    if code != 0 or "the job was already complete" not in output:
        fail(f"the rerun after the stop: exit {code}: {output[-3000:]}")
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        meta_restarts = int(f["meta"].attrs["restarts"])
        largest = {table: int(max(f[table]["restart"][:])) for table in ("steps", "rollouts")}
        steps = list(f["steps/step"][:])
        superseded = int(sum(f["steps/superseded"][:])) + int(sum(f["rollouts/superseded"][:]))
        if "trainer_weight_sha256" not in f["meta"].attrs:
            fail("the rerun that found the job complete wrote no trainer_weight_sha256")
    if any(meta_restarts != r for r in largest.values()):
        fail(f"/meta restarts is {meta_restarts}, the rows' largest restart {largest}")
    if steps != list(range(FINAL_STEP + 1)) or superseded != 0:
        fail(f"/steps steps {steps}, {superseded} row(s) superseded: the stop lost or re-did a step")
    print(f"ok: stopped during the final checkpoint (exit 5), then complete; /meta restarts {meta_restarts} = rows' {largest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
