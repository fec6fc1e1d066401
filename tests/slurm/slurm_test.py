#!/usr/bin/env python3
"""The slurm/ scripts on a real one-node Slurm (tools/slurm-local.sh), as CI runs them (ctest -L slurm).

Cases (--case):
  start, stop     the local Slurm of the tests (its own state folder and ports), a ctest fixture
  eval_array      slurm/eval-array.sbatch: a 3-task array judges 5 candidates on the CPU, one HDF5
                  part each, then the merge job joins them: every candidate judged once, row ids
                  unique, texts keyed by the right rows, every part's /meta kept; the merge
                  refuses a sweep with a part not done, naming it
  script_stops    slurm/crl.sbatch's stop handling with a stand-in for crl run that follows the
                  stop contract (stop_contract_double.sh): the time-limit signal requeues the job
                  and it resumes to the end with no step done twice; `scontrol requeue` resumes
                  too; scancel's SIGTERM ends it cleanly, not requeued
Each case prints "SKIP: why" and exits 0 where no Slurm can start (ctest shows it skipped).
Usage: slurm_test.py --case NAME --crl build/apps/crl/crl --work DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLURM_LOCAL = os.path.join(REPO, "tools", "slurm-local.sh")
HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def skip(message):
    print("SKIP:", message)
    sys.exit(0)


class Slurm:
    """The tests' local Slurm: commands run with its SLURM_CONF, jobs submitted from `work`."""

    def __init__(self, state, work, crl):
        self.env = dict(os.environ)
        # Apart from a user's own tools/slurm-local.sh (default port 6817) on the same machine.
        self.env.update({"CRL_SLURM_STATE": state, "CRL_SLURM_PORT": "6837", "CRL_SLURM_KILL_WAIT": "30"})
        self.env["SLURM_CONF"] = os.path.join(state, "slurm.conf")
        self.env.update({"CRL_SOURCE_DIR": REPO, "CRL_BIN": crl})
        self.work = work

    def run(self, *command, check=True, env=None):
        result = subprocess.run(command, env=env or self.env, cwd=self.work, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=120)
        if check and result.returncode != 0:
            fail(f"{' '.join(command)} exited {result.returncode}: {result.stdout}")
        return result

    def local(self, action):
        return subprocess.run([SLURM_LOCAL, action], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=120)

    def require_running(self):
        if self.local("status").returncode != 0:
            skip("the tests' local Slurm is not running (the slurm_start test says why)")

    def sbatch(self, *args, env=None):
        out = self.run("sbatch", "--parsable", *args, env=env).stdout.strip()
        return out.split(";")[0]

    def job(self, job_id):
        """scontrol's fields of a job (the first of an array)."""
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out.splitlines()[0])) if out.strip() else {}

    def states(self, job_id):
        out = self.run("squeue", "-h", "-r", "-j", job_id, "-o", "%T", check=False).stdout
        return out.split()

    def wait_until(self, what, predicate, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        fail(f"timed out after {timeout} s waiting for {what}\n{self.run('squeue', check=False).stdout}")

    def wait_gone(self, job_id, timeout):
        self.wait_until(f"job {job_id} to end", lambda: not self.states(job_id), timeout)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
def case_eval_array(slurm, args):
    import h5py

    # 5 candidates of 3 tasks: 2 right, 1 wrong, 2 references judged against themselves.
    def program(path):
        return read(os.path.join(REPO, path))

    candidates = [
        {"id": "relu_same", "task": "level1/019_relu", "program": program("tests/data/eval/relu/same_as_reference.crl")},
        {"id": "relu_wrong", "task": "level1/019_relu", "program": program("tests/data/eval/relu/wrong_values.crl")},
        {"id": "relu_ref", "task": "level1/019_relu", "program": program("jobs/suite/level1/019_relu.crl")},
        {"id": "sigmoid_ref", "task": "level1/021_sigmoid", "program": program("jobs/suite/level1/021_sigmoid.crl")},
        {"id": "tanh_ref", "task": "level1/022_tanh", "program": program("jobs/suite/level1/022_tanh.crl")},
    ]
    with open(os.path.join(slurm.work, "candidates.jsonl"), "w") as f:
        for c in candidates:
            f.write(json.dumps(c) + "\n")

    start = time.time()
    array = slurm.sbatch("--array=0-2", "-J", "evaltest", os.path.join(REPO, "slurm", "eval-array.sbatch"),
                         "candidates.jsonl", "--backend", "cpu", "--scale", "small", "--trials", "2",
                         "--time-budget", "0.2")
    merge = slurm.sbatch(f"--dependency=afterok:{array}", "-J", "evaltest-merge", "-o", "results/%x-%j.log",
                         os.path.join(REPO, "slurm", "eval-array.sbatch"), "--merge", f"results/evaltest-{array}")
    slurm.wait_gone(array, 180)
    slurm.wait_gone(merge, 60)
    print(f"array and merge took {time.time() - start:.1f} s")
    sweep = os.path.join(slurm.work, "results", f"evaltest-{array}")
    logs = [os.path.join(slurm.work, "results", f"evaltest-{array}_{i}.log") for i in range(3)]
    for log in logs:
        print(f"--- {log}\n{read(log) if os.path.exists(log) else '(missing)'}")
    for i, log in enumerate(logs):
        text = read(log)
        if f"--slice {i}/3" not in text or "restart 0]" not in text:
            fail(f"{log} does not show the printed command with --slice {i}/3 and the restart count")
    state = slurm.job(merge).get("JobState")
    if state != "COMPLETED":
        fail(f"the merge job ended {state}: {read(os.path.join(slurm.work, 'results', f'evaltest-merge-{merge}.log'))}")

    with h5py.File(os.path.join(sweep, "sweep.h5"), "r") as f:
        rows = list(f["verdicts/row"][:])
        names = list(f["verdicts/candidate"].asstr()[:])
        status = dict(zip(names, f["verdicts/status"].asstr()[:]))
        if sorted(names) != sorted(c["id"] for c in candidates):
            fail(f"the sweep judged {names}, not each of the 5 candidates once")
        if sorted(rows) != list(range(5)):
            fail(f"the merged row ids are {rows}, not 0..4")
        if status["relu_same"] != "ok" or status["relu_wrong"] != "mismatch" or status["tanh_ref"] != "ok":
            fail(f"verdicts changed in the merge: {status}")
        steps_ids = sorted(f["text/verdict_steps/id"][:])
        if steps_ids != sorted(rows):
            fail(f"the verdict_steps store has ids {steps_ids}, not the rows {rows}")
        # Each row's steps are its own verdict's: the wrong program's show a failing check.
        by_id = dict(zip(f["text/verdict_steps/id"][:], f["text/verdict_steps/text"].asstr()[:]))
        for row, name in zip(rows, names):
            passed = [s["passed"] for s in json.loads(by_id[row])]
            if (name == "relu_wrong") == all(passed):
                fail(f"row {row} ({name}): its steps {by_id[row]} do not belong to its verdict")
        parts = json.loads(f["meta"].attrs["merged_parts"])
        slices = [p["meta"].get("eval_slice") for p in parts]
        if slices != ["0/3", "1/3", "2/3"] or sum(p["rows"].get("verdicts", 0) for p in parts) != 5:
            fail(f"merged_parts does not keep the 3 parts' /meta and rows: {parts}")

    # A sweep with a part not done is refused, naming the slice.
    broken = os.path.join(slurm.work, "broken-sweep")
    shutil.copytree(sweep, broken)
    os.remove(os.path.join(broken, "sweep.h5"))
    os.remove(os.path.join(broken, "part-0001.done"))
    refused = slurm.run("bash", os.path.join(REPO, "slurm", "eval-array.sbatch"), "--merge", broken, check=False)
    if refused.returncode != 3 or "slices 1 of 3 are not done" not in refused.stdout:
        fail(f"a sweep with slice 1 not done merged anyway or said nothing useful: {refused.stdout}")
    print("eval array: 3 parts judged and merged, ids unique, /meta kept")


# ---------------------------------------------------------------------------------------------
def case_script_stops(slurm, args):
    double = os.path.join(HERE, "stop_contract_double.sh")
    env = dict(slurm.env, CRL_BIN=double, STEPS="14", STEP_SECONDS="0.5")
    script = os.path.join(REPO, "slurm", "crl.sbatch")
    job_file = os.path.join(REPO, "jobs", "ci.yaml")

    def submit(name):
        return slurm.sbatch("-J", name, "-n", "1", script, job_file, env=env)

    def steps_of(name, job):
        path = os.path.join(slurm.work, "results", f"{name}-{job}", "steps.txt")
        return [tuple(map(int, line.split())) for line in read(path).split("\n") if line] if os.path.exists(path) else []

    def log_of(name, job):
        return read(os.path.join(slurm.work, "results", f"{name}-{job}.log"))

    def check_resumed(name, job, how):
        steps = steps_of(name, job)
        numbers = [s for s, _ in steps]
        if numbers != list(range(14)):
            fail(f"{how}: steps done {numbers}, not 0..13 each once\n{log_of(name, job)}")
        if max(r for _, r in steps) != 1 or min(r for _, r in steps) != 0:
            fail(f"{how}: the steps do not span restart 0 and 1: {steps}")
        log = log_of(name, job)
        for needle in ("restart 1]", "resuming from step", "] done"):
            if needle not in log:
                fail(f"{how}: the log lacks '{needle}'\n{log}")
        if slurm.job(job).get("JobState") != "COMPLETED":
            fail(f"{how}: job {job} ended {slurm.job(job).get('JobState')}\n{log}")

    # The time-limit signal (as Slurm sends it with --signal=B:USR1@S): stop, requeue, resume.
    job = submit("tl")
    slurm.wait_until("3 steps of the time-limit job", lambda: len(steps_of("tl", job)) >= 3, 60)
    slurm.run("scancel", "--signal=USR1", "--batch", job)
    slurm.wait_until("the time-limit job to restart and end",
                     lambda: slurm.job(job).get("Restarts") == "1" and not slurm.states(job), 90)
    check_resumed("tl", job, "after the time-limit signal")
    if "requeueing job" not in log_of("tl", job):
        fail("the script did not say it requeued the job")

    # scontrol requeue (what preemption with PreemptMode=REQUEUE does): SIGTERM, then Slurm requeues.
    job = submit("rq")
    slurm.wait_until("3 steps of the requeued job", lambda: len(steps_of("rq", job)) >= 3, 60)
    slurm.run("scontrol", "requeue", job)
    slurm.wait_until("the requeued job to restart and end",
                     lambda: slurm.job(job).get("Restarts") == "1" and not slurm.states(job), 90)
    check_resumed("rq", job, "after scontrol requeue")

    # scancel: SIGTERM, a stop with a checkpoint, and a clean end without a requeue.
    job = submit("cancel")
    slurm.wait_until("3 steps of the cancelled job", lambda: len(steps_of("cancel", job)) >= 3, 60)
    slurm.run("scancel", job)
    slurm.wait_gone(job, 60)
    log = log_of("cancel", job)
    if "stopped after SIGTERM" not in log or "requeueing" in log or slurm.job(job).get("Restarts") != "0":
        fail(f"scancel did not end the job cleanly without a requeue\n{log}")
    if len(steps_of("cancel", job)) >= 14:
        fail("the cancelled job ran to its end")
    print("crl.sbatch: time-limit signal requeued and resumed; scontrol requeue resumed; scancel ended cleanly")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=["start", "stop", "eval_array", "script_stops"])
    ap.add_argument("--crl", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    state = os.path.join(os.path.dirname(args.work.rstrip("/")), "slurm-state")
    slurm = Slurm(state, args.work, os.path.abspath(args.crl))

    if args.case == "start":
        if not shutil.which("slurmctld", path="/usr/sbin:/usr/bin") or not shutil.which("sbatch"):
            skip("Slurm is not installed (tools/setup.sh installs slurm-wlm and munge)")
        result = slurm.local("start")
        print(result.stdout)
        if result.returncode != 0:
            skip(f"the local Slurm did not start: {result.stdout.strip()}")
        return 0
    if args.case == "stop":
        print(slurm.local("stop").stdout)
        return 0

    slurm.require_running()
    try:
        import h5py  # noqa: F401
    except ImportError:
        skip(f"h5py is not installed in {sys.executable}")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(os.path.join(args.work, "results"))
    {"eval_array": case_eval_array, "script_stops": case_script_stops}[args.case](slurm, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
