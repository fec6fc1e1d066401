#!/usr/bin/env python3
"""What a generating stage's rollouts came to, as the job's log says it (ctest job_stage_outcome,
CPU; issue 43, row 8):
  - the per-step progress line names every verdict status that occurred, hacks by kind: one crl
    step of five rollouts, four planted (a correct program, one that does not compile, a wrong one,
    an input-mutating hack) and the tiny model's own text (no program), must read
    "rollouts 5: ok 1, compile_error 1, mismatch 1, hack:input_mutation 1, format_error 1", and the
    job ends with its plain "done" line;
  - a selftrain and a crl stage whose rollouts were all format_error (the tiny model writes no
    program) each end with a warning saying so, which the job's last line repeats ("done ... with 2
    warning(s)") and /meta `warnings` keeps; the job still exits 0 (it ran as asked).
Usage: stage_outcome_test.py --crl build/apps/crl/crl --work DIR
"""
import json
import os
import subprocess
import sys

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail, job_head

HEAD = job_head("stage-outcome", "level1/019_relu", 'scale: small, trials: 1, time_budget: 0.1, call_timeout: 10, max_relative_ci: 10') + f"""stages:
"""
PLANTED = HEAD + f"""  - kind: crl
    steps: 1
    batch: 1
    G: 5
    K: 0
    lr: 1.0e-4
    sampling: {{temperature: 1.0, max_new_tokens: 8}}
    planted:
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/same_as_reference.crl}}
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/does_not_compile.crl}}
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/relu/wrong_values.crl}}
      - {{task: level1/019_relu, file: {REPO}/tests/data/eval/hacks/input_mutation.hack.cpu.crl}}
"""
NOTHING = HEAD + """  - kind: selftrain
    steps: 1
    batch: 1
    G: 2
    lr: 1.0e-4
    sampling: {temperature: 1.0, max_new_tokens: 8}
  - kind: crl
    steps: 1
    batch: 1
    G: 2
    K: 0
    lr: 1.0e-4
    sampling: {temperature: 1.0, max_new_tokens: 8}
"""


def run(args, text, model, name):
    job = os.path.join(args.work, name + ".yaml")
    with open(job, "w") as f:
        f.write(text)
    env = dict(os.environ)
    env.update(MPIRUN_ENV)
    run_dir = os.path.join(args.work, name)
    command = [args.mpirun, "-np", "2", "--oversubscribe", args.crl, "run", job, "--model", model, "--run-dir", run_dir]
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout)
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}")
    return p.stdout, run_dir


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    import h5py  # present: prepare() checked

    out, _ = run(args, PLANTED, model, "planted")
    line = "rollouts 5: ok 1, compile_error 1, mismatch 1, hack:input_mutation 1, format_error 1 |"
    if line not in out:
        fail(f"the step's progress line does not read '{line}'")
    if "learnt nothing" in out:
        fail("a stage with a correct program was warned of")
    if "job stage-outcome done in" not in out:
        fail("the job's plain done line is missing")

    out, run_dir = run(args, NOTHING, model, "nothing")
    for stage, step in (("selftrain", 0), ("crl", 1)):
        said = f"the {stage} stage that ended at step {step} judged no program: all 2 of its rollouts were format_error"
        if out.count(said) != 2:  # when the stage ends, and again before the job's last line
            fail(f"'{said}' is said {out.count(said)} time(s), not 2")
    done = [l for l in out.splitlines() if "job stage-outcome done in" in l]
    if len(done) != 1 or "with 2 warning(s) (above; /meta warnings)" not in done[0]:
        fail(f"the job's done line does not count the warnings: {done}")
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        warnings = json.loads(f["meta"].attrs["warnings"])
        if len(warnings) != 2 or "selftrain" not in warnings[0] or "crl" not in warnings[1]:
            fail(f"/meta warnings: {warnings}")
    print("PASS: every status on the progress line; stages that judged no program end with a warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
