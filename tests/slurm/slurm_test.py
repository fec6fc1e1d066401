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
  job_preempt     a CI-like job (tests/job/resume.yaml: 2 trainers + 2 evaluators, CPU) under
                  slurm/crl.sbatch, requeued by `scontrol requeue` while it runs and then sent the
                  time-limit signal once its resumed run did a step: it resumes twice and runs to the end, every step and rollout
                  once among the rows that count (not superseded); then slurm/cross-gpu.sbatch
                  judges the run's best programs again
  job_early_stop  that job sent the time-limit signal as its step starts: stopped before its first
                  step (exit 5), requeued, run to the end with every row once
  job_kill        that job with one rank killed by kill -9 in the middle: the job fails naming
                  the rank; with a checkpoint cut in the middle of its write added, the same sbatch
                  line with the same run folder skips it (saying so) and resumes to the end
  submit_outside  slurm/submit.sh from a folder outside the checkout that has no results/: it makes
                  the log folder (the script's #SBATCH --output, or -o) and points the script at
                  its checkout, so the job runs and logs (a stand-in crl); a log folder it cannot
                  make is exit 3 naming it, with nothing submitted
  docs_try_it     docs/slurm.md's "Trying it on one machine" lines as written, in a tree laid out
                  as a fresh clone after tools/setup.sh (no model, no results/): the model is made,
                  the CI job and the eval array run to the end and log into results/
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

    def __init__(self, state, work, crl, deadline):
        # deadline: time.time() by which the case must have failed with its own message (before
        # ctest's TIMEOUT kills it and nothing of why is printed).
        self.deadline = deadline
        self.log_path = None  # the job log a failure prints (set by the cases that have one)
        self.env = dict(os.environ)
        # Apart from a user's own tools/slurm-local.sh (default port 6817) on the same machine; a
        # SIGTERM leaves the job 120 s to stop, as a crl step on a loaded 2-core machine can take a minute.
        self.env.update({"CRL_SLURM_STATE": state, "CRL_SLURM_PORT": "6837", "CRL_SLURM_KILL_WAIT": "120"})
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

    def wait_until(self, what, predicate, timeout, job=None):
        """Polls `predicate` until it holds; with `job`, fails at once (with the log) if that job
        has left the queue for good meanwhile."""
        timeout = min(timeout, self.deadline - time.time())
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            if job is not None and not self.states(job):
                time.sleep(2)  # a requeue in its first instant
                if not self.states(job) and not predicate():
                    self.fail_with_log(f"job {job} ended ({self.job(job).get('JobState')}) while waiting for {what}")
            time.sleep(0.3)
        self.fail_with_log(f"timed out after {timeout:.0f} s waiting for {what}\n{self.run('squeue', check=False).stdout}")

    def wait_gone(self, job_id, timeout):
        self.wait_until(f"job {job_id} to end", lambda: not self.states(job_id), timeout)

    def wait_job_end(self, job_id, restarts, timeout, launch_failures_count=True):
        """Waits until the job has left the queue for good, then checks it restarted `restarts`
        times and COMPLETED; a job that ended otherwise fails at once, with its log. A step that
        never ran (crl.sbatch requeues it: its log says so) adds a restart (launch_failures_count)."""
        def expected():
            return restarts + (self.log().count("to run the step again (restart") if launch_failures_count else 0)

        def gone_for_good():
            if self.states(job_id):
                return False
            if self.job(job_id).get("Restarts") == str(expected()):
                return True
            time.sleep(2)  # a requeue in its first instant: the job may be back in the queue
            return not self.states(job_id)

        self.wait_until(f"job {job_id} to end after {restarts} restarts", gone_for_good, timeout)
        info = self.job(job_id)
        if info.get("Restarts") != str(expected()) or info.get("JobState") != "COMPLETED":
            self.fail_with_log(f"job {job_id} ended {info.get('JobState')} after {info.get('Restarts')} restarts, "
                               f"not COMPLETED after {expected()}")
        if expected() != restarts:
            print(f"note: job {job_id}'s step did not run {expected() - restarts} time(s) and was requeued (its log above)")

    def log(self):
        """The watched job's log so far ("" before it exists)."""
        return read(self.log_path) if self.log_path and os.path.exists(self.log_path) else ""

    def fail_with_log(self, message):
        fail(f"{message}\n--- the job's log, {self.log_path}:\n{self.log()[-6000:] or '(none)'}")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
def case_eval_array(slurm, args):
    import h5py

    # 5 candidates of 3 tasks: 2 right, 1 wrong, 2 references judged against themselves; correctness
    # only (timing on the CPU costs a minute a candidate, whatever --time-budget says).
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
                         "candidates.jsonl", "--backend", "cpu", "--scale", "small", "--trials", "2", "--no-timing")
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

    def submit(name, **extra):
        job = slurm.sbatch("-J", name, "-n", "1", script, job_file, env=dict(env, **extra))
        slurm.log_path = os.path.join(slurm.work, "results", f"{name}-{job}.log")
        return job

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
    slurm.wait_job_end(job, 1, 90)
    check_resumed("tl", job, "after the time-limit signal")
    if "requeueing job" not in log_of("tl", job):
        fail("the script did not say it requeued the job")

    # scontrol requeue (what preemption with PreemptMode=REQUEUE does): SIGTERM, then Slurm requeues.
    job = submit("rq")
    slurm.wait_until("3 steps of the requeued job", lambda: len(steps_of("rq", job)) >= 3, 60)
    slurm.run("scontrol", "requeue", job)
    slurm.wait_job_end(job, 1, 90)
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

    # A step that exits 0 without running the job (an srun whose tasks failed to launch, as seen in
    # a fresh clone's ctest): no "done", a requeue, and the job runs at its restart; with no restarts
    # left, exit 1.
    job = submit("lf", LAUNCH_FAILS_AT_RESTART="0")
    slurm.wait_job_end(job, 1, 90, launch_failures_count=False)
    log = log_of("lf", job)
    steps = steps_of("lf", job)
    if ("did not run the job to its end" not in log or "to run the step again (restart 1)" not in log
            or [s for s, _ in steps] != list(range(14)) or {r for _, r in steps} != {1}):
        fail(f"a step that exited 0 without running was not requeued and run at restart 1: steps {steps}\n{log}")
    job = submit("lf0", LAUNCH_FAILS_AT_RESTART="0", CRL_MAX_RESTARTS="0")
    slurm.wait_gone(job, 60)
    log = log_of("lf0", job)
    info = slurm.job(job)
    if info.get("JobState") != "FAILED" or info.get("ExitCode") != "1:0" or "not requeued" not in log or "] done" in log:
        fail(f"with no restarts left, a step that did not run ended {info.get('JobState')} {info.get('ExitCode')}\n{log}")
    print("crl.sbatch: time-limit signal requeued and resumed; scontrol requeue resumed; scancel ended cleanly; "
          "a step that exited 0 without running requeued, or failed with no restarts left")


# ---------------------------------------------------------------------------------------------
def make_model(slurm, args):
    model = os.path.join(slurm.work, "model")
    corpus = os.path.join(REPO, "tests", "data", "policy", "tokenizers", "train_corpus.txt")
    slurm.run(args.crl, "init-model", "--out", model, "--corpus", corpus, "--vocab-size", "400", "--hidden", "32",
              "--layers", "1", "--heads", "2", "--kv-heads", "1", "--seed", "3")
    return model


def results_rows(path, table):
    """Rows of a table in a results file being written (0 before its first flush)."""
    import h5py
    for _ in range(5):
        try:
            with h5py.File(path, "r", locking=False) as f:
                return len(f[f"{table}/{f[table].attrs['crl_columns'][0]}"]) if table in f else 0
        except (OSError, KeyError):
            time.sleep(0.2)
    return 0


# The stop/resume test's job (tests/job/resume.yaml: like the CI job jobs/ci.yaml, untimed, with
# checkpoints every few steps) with 40 crl steps of about half a second, so that the signals land
# while it runs and a stop always leaves steps to resume.
CRL_STEPS = 40
RESUME_JOB = {"crl_steps": CRL_STEPS, "rollouts": CRL_STEPS * 3 * 2}


def write_job(slurm):
    text = read(os.path.join(REPO, "tests", "job", "resume.yaml"))
    text = re.sub(r"\n    steps: 8\n", f"\n    steps: {CRL_STEPS}\n", text)
    # Its relative paths are relative to tests/job; this copy lives in the work folder.
    text = text.replace("../../", REPO + "/").replace("file: ../data/", f"file: {REPO}/tests/data/")
    path = os.path.join(slurm.work, "job.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def submit_job(slurm, name, model, env=None):
    # 4 ranks on a 2-CPU machine: --overcommit.
    job_file = os.path.join(slurm.work, "job.yaml")
    if not os.path.exists(job_file):
        write_job(slurm)
    job = slurm.sbatch("-J", name, "-n", "4", "--overcommit", os.path.join(REPO, "slurm", "crl.sbatch"),
                       job_file, "--model", model, env=env)
    slurm.log_path = os.path.join(slurm.work, "results", f"{name}-{job}.log")
    return job


def check_whole_run(run_dir, log, restarts, job=RESUME_JOB):
    """Every step of the job and every rollout of its crl stage once among the rows that count."""
    import h5py
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps = list(f["steps/step"][:])
        superseded = list(f["steps/superseded"][:]) if "superseded" in f["steps"] else [False] * len(steps)
        stages = list(f["steps/stage"].asstr()[:])
        counted_steps = [st for st, sup in zip(steps, superseded) if not sup]
        crl_steps = [st for st, stage, sup in zip(steps, stages, superseded) if not sup and stage == "crl"]
        if counted_steps != list(range(len(counted_steps))) or len(crl_steps) != job["crl_steps"]:
            fail(f"/steps holds steps {steps} (superseded {superseded}), not each step once\n{log}")
        r = f["rollouts"]
        live = [not s for s in r["superseded"][:]]
        ids = [i for i, keep in zip(r["rollout_id"][:], live) if keep]
        keys = [(s, t, g, k) for s, t, g, k, keep in zip(r["step"][:], r["task"].asstr()[:], r["group"][:],
                                                         r["sample"][:], live) if keep]
        n = job["rollouts"]
        if len(ids) != n or len(set(ids)) != n or len(set(keys)) != n:
            fail(f"{len(ids)} rollouts count ({len(set(keys))} distinct), not the {n} of the crl stage once each")
        restart = list(f["steps/restart"][:])
        if restarts is not None and max(restart) != restarts:
            fail(f"/steps restart column is {restart}, not up to {restarts}")


def case_job_preempt(slurm, args):
    model = make_model(slurm, args)
    start = time.time()
    job = submit_job(slurm, "rs", model)
    run_dir = os.path.join(slurm.work, "results", f"rs-{job}")
    results = os.path.join(run_dir, "results.h5")
    log_path = os.path.join(slurm.work, "results", f"rs-{job}.log")
    # Preempted (what PreemptMode=REQUEUE does) in the crl stage, once two of its steps are flushed.
    # (A stop at the sft stage's end does not resume yet: crl run then looks for the /text/programs
    # store, which only the crl stage's first step makes.)
    slurm.wait_until("two crl steps", lambda: results_rows(results, "rollouts") >= 2 * 3 * 2, 240, job=job)
    slurm.run("scontrol", "requeue", job)
    # The time-limit signal once the resumed run has done a step (a signal before it stops the run
    # before its first step, with no rows: case job_early_stop).
    def resumed_and_stepped():
        log = read(log_path)
        after = log[log.rfind("resuming from"):] if "resuming from" in log else ""
        return slurm.job(job).get("Restarts") == "1" and re.search(r"\[(sft|crl)\] step \d+", after) is not None

    slurm.wait_until("the requeued job to resume and do a step", resumed_and_stepped, 180, job=job)
    slurm.run("scancel", "--signal=USR1", "--batch", job)
    slurm.wait_job_end(job, 2, 300)
    log = read(log_path)
    print(log)
    print(f"the preempted CI job took {time.time() - start:.1f} s")
    for needle in ("restart 1]", "restart 2]", "requeueing job", "] done"):
        if needle not in log:
            fail(f"the log lacks '{needle}'")
    if log.count("resuming from") < 2 or log.count("stopped at") < 2:
        fail("the log does not show two stops and two resumes")
    check_whole_run(run_dir, log, 2, RESUME_JOB)
    print("the job: requeued, then stopped by the time-limit signal, resumed both times to the end")
    check_cross_gpu(slurm, run_dir)


def case_job_early_stop(slurm, args):
    """The time-limit signal as the job's step starts (issue 43: a requeued job got it 3 s after
    restarting, and SIGUSR1 killed every rank, exit 138, the job FAILED): crl stops before its first
    step (exit 5), the script requeues the job, and it runs to the end, every row once."""
    model = make_model(slurm, args)
    job = submit_job(slurm, "early", model)
    run_dir = os.path.join(slurm.work, "results", f"early-{job}")
    log_path = os.path.join(slurm.work, "results", f"early-{job}.log")
    slurm.wait_until("the job's step to start", lambda: os.path.exists(log_path) and "+ srun" in read(log_path), 120, job=job)
    slurm.run("scancel", "--signal=USR1", "--batch", job)
    slurm.wait_job_end(job, 1, 300)
    log = read(log_path)
    print(log)
    for needle in ("stopped before the first step (SIGUSR1", "requeueing job", "restart 1]", "] done"):
        if needle not in log:
            fail(f"the log lacks '{needle}'")
    check_whole_run(run_dir, log, None, RESUME_JOB)
    print("the job: the time-limit signal at its start stopped it cleanly, requeued, run to the end")


def check_cross_gpu(slurm, run_dir):
    """slurm/cross-gpu.sbatch on a finished run: its correct programs (the planted copy of the ReLU
    reference) judged again, here on the same CPU."""
    import h5py
    results = os.path.join(run_dir, "results.h5")
    cross = slurm.sbatch("-J", "cross", os.path.join(REPO, "slurm", "cross-gpu.sbatch"), run_dir,
                         "--backend", "cpu", "--scale", "small", "--trials", "2", "--no-timing")
    slurm.wait_gone(cross, 120)
    out = os.path.join(slurm.work, "results", f"cross-{cross}")
    cross_log = read(os.path.join(slurm.work, "results", f"cross-{cross}.log"))
    if slurm.job(cross).get("JobState") != "COMPLETED":
        fail(f"cross-gpu.sbatch ended {slurm.job(cross).get('JobState')}\n{cross_log}")
    best = [json.loads(line) for line in read(os.path.join(out, "best.jsonl")).splitlines()]
    with h5py.File(results, "r") as f:
        r = f["rollouts"]
        ok_tasks = {t for t, st, sup in zip(r["task"].asstr()[:], r["status"].asstr()[:], r["superseded"][:])
                    if st == "ok" and not sup}
    if sorted(b["task"] for b in best) != sorted(ok_tasks) or not best:
        fail(f"best.jsonl holds {[b['task'] for b in best]}, not one program of each task with a correct rollout {ok_tasks}")
    with h5py.File(os.path.join(out, "cross.h5"), "r") as f:
        status = list(f["verdicts/status"].asstr()[:])
    if len(status) != len(best) or "ok" not in status:
        fail(f"cross.h5 verdicts {status} for {len(best)} programs\n{cross_log}")
    print(f"cross-gpu.sbatch: {len(best)} best programs judged again ({status})")


def case_job_kill(slurm, args):
    model = make_model(slurm, args)
    job = submit_job(slurm, "kill", model)
    run_dir = os.path.join(slurm.work, "results", f"kill-{job}")
    results = os.path.join(run_dir, "results.h5")
    # Past the sft stage (its checkpoint written), in the first step of the crl stage.
    import glob
    checkpoints = lambda: sorted(glob.glob(os.path.join(run_dir, "**", "step-*"), recursive=True))  # noqa: E731
    slurm.wait_until("a checkpoint and two steps after it",
                     lambda: checkpoints() and results_rows(results, "steps") >= 6, 240, job=job)
    flushed = results_rows(results, "steps")
    # scontrol listpids: PID JOBID STEPID LOCALID GLOBALID; kill -9 the evaluator with world rank 3.
    victim = None
    for line in slurm.run("scontrol", "listpids", job).stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) == 5 and fields[2] == "0" and fields[4] == "3":
            victim = int(fields[0])
    if victim is None:
        fail(f"no rank 3 in scontrol listpids {job}")
    os.kill(victim, 9)
    slurm.wait_gone(job, 240)
    log = read(os.path.join(slurm.work, "results", f"kill-{job}.log"))
    print(log)
    if slurm.job(job).get("JobState") == "COMPLETED":
        fail("the job with a killed rank completed")
    if not re.search(r"(rank|task):? 3\b", log):
        fail("the log does not name the killed rank 3")
    # Every row flushed before the kill is still there, and h5py reads the whole file.
    import h5py
    with h5py.File(results, "r") as f:
        for table in ("steps", "rollouts"):
            if table in f:
                for column in f[table].attrs["crl_columns"]:
                    f[table][column][:]
        if len(f["steps/step"]) < flushed:
            fail(f"/steps lost rows in the kill: {len(f['steps/step'])} < {flushed}")
    # A checkpoint cut in the middle of its write, newer than every good one: its model file half
    # there (a copy of the newest good checkpoint, as a file system may leave it), and the .tmp-
    # folder a kill during a save leaves. The rerun must skip both and say which it skipped.
    import glob
    good = checkpoints()
    cut = os.path.join(os.path.dirname(good[-1]), "step-%08d" % 99999)
    shutil.copytree(good[-1], cut)
    biggest = max(glob.glob(os.path.join(cut, "*")), key=os.path.getsize)
    with open(biggest, "r+b") as f:
        f.truncate(os.path.getsize(biggest) // 2)
    shutil.copytree(good[-1], os.path.join(os.path.dirname(good[-1]), ".tmp-step-%08d" % 99998))
    # The same line with the same run folder resumes from the newest good checkpoint.
    again = submit_job(slurm, "kill", model, env=dict(slurm.env, CRL_RUN_DIR=run_dir))
    slurm.wait_gone(again, 300)
    log2 = read(os.path.join(slurm.work, "results", f"kill-{again}.log"))
    print(log2)
    if slurm.job(again).get("JobState") != "COMPLETED" or "resuming from" not in log2:
        fail(f"the rerun did not resume to the end (state {slurm.job(again).get('JobState')})")
    resumed_from = [line for line in log2.splitlines() if "resuming from" in line]
    if os.path.basename(cut) not in log2 or not any(os.path.basename(good[-1]) in line for line in resumed_from):
        fail(f"the rerun did not say it skipped the cut checkpoint {cut} for {good[-1]}")
    check_whole_run(run_dir, log + log2, 1, RESUME_JOB)
    print("CI job: rank 3 killed, the failure named it, the rerun resumed to the end")


# ---------------------------------------------------------------------------------------------
def submitted_id(output):
    match = re.search(r"Submitted batch job (\d+)", output)
    if not match:
        fail(f"no job id in: {output}")
    return match.group(1)


def fresh_clone(slurm, args):
    """A tree laid out as a clone after tools/setup.sh: the checkout's files (linked) and the built
    crl, with no results/ and no model."""
    clone = os.path.join(slurm.work, "clone")
    os.makedirs(os.path.join(clone, "build", "apps", "crl"))
    for name in ("slurm", "jobs", "tests", "tools", "docs"):
        os.symlink(os.path.join(REPO, name), os.path.join(clone, name))
    os.symlink(args.crl, os.path.join(clone, "build", "apps", "crl", "crl"))
    return clone


def plain_env(slurm, **extra):
    """The tests' Slurm without the checkout's CRL_SOURCE_DIR and CRL_BIN: what slurm/submit.sh sets."""
    env = {k: v for k, v in slurm.env.items() if k not in ("CRL_SOURCE_DIR", "CRL_BIN")}
    env.update(extra)
    return env


def case_submit_outside(slurm, args):
    clone = fresh_clone(slurm, args)
    elsewhere = os.path.join(slurm.work, "elsewhere")
    os.makedirs(elsewhere)
    shutil.rmtree(os.path.join(slurm.work, "results"))
    submit = os.path.join(clone, "slurm", "submit.sh")
    job_file = os.path.join(REPO, "jobs", "ci.yaml")
    env = plain_env(slurm, CRL_BIN=os.path.join(HERE, "stop_contract_double.sh"), STEPS="3", STEP_SECONDS="0.2")

    def run_in(folder, *command):
        return subprocess.run(command, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)

    # The script's own #SBATCH --output=results/%x-%j.log, and a nested -o, from a folder without them.
    for extra, log in ((), "results/out-{id}.log"), (("-o", "logs/deep/%x-%j.log"), "logs/deep/out-{id}.log"):
        r = run_in(elsewhere, submit, "-J", "out", "-n", "1", *extra, os.path.join(clone, "slurm", "crl.sbatch"), job_file)
        if r.returncode != 0:
            fail(f"slurm/submit.sh exited {r.returncode}: {r.stdout}")
        job = submitted_id(r.stdout)
        slurm.wait_gone(job, 60)
        path = os.path.join(elsewhere, log.format(id=job))
        if not os.path.exists(path):
            fail(f"no log {path}: the job ended {slurm.job(job).get('JobState')}")
        text = read(path)
        if slurm.job(job).get("JobState") != "COMPLETED" or "] done" not in text or f"submitted from {elsewhere}" not in text:
            fail(f"the job submitted from {elsewhere} ended {slurm.job(job).get('JobState')}:\n{text}")
    # A log folder that cannot be made: refused before sbatch, naming it.
    with open(os.path.join(elsewhere, "a-file"), "w") as f:
        f.write("not a folder")
    before = slurm.run("squeue", "-h", "-o", "%i").stdout.split()
    r = run_in(elsewhere, submit, "-J", "nolog", "-o", "a-file/%x-%j.log", os.path.join(clone, "slurm", "crl.sbatch"), job_file)
    if r.returncode != 3 or os.path.join(elsewhere, "a-file") not in r.stdout or "Submitted" in r.stdout:
        fail(f"a log folder that is a file: exit {r.returncode}, {r.stdout}")
    if slurm.run("squeue", "-h", "-o", "%i").stdout.split() != before:
        fail("slurm/submit.sh submitted a job whose log folder it could not make")
    print("slurm/submit.sh: jobs from outside the checkout logged into folders it made; an impossible one refused, exit 3")


def case_docs_try_it(slurm, args):
    clone = fresh_clone(slurm, args)
    text = read(os.path.join(REPO, "docs", "slurm.md"))
    section = text[text.index("## Trying it on one machine"):]
    block = re.search(r"\n\n((?:    .*\n)+)", section).group(1)
    lines = [line.strip() for line in block.splitlines() if not line.strip().startswith("tools/slurm-local.sh")]
    if not any("init-model" in line for line in lines) or sum("slurm/submit.sh" in line for line in lines) != 2:
        fail(f"the try-it block no longer makes a model and submits two jobs: {lines}")
    env = plain_env(slurm)
    start = time.time()
    jobs = []
    for line in lines:
        r = subprocess.run(["bash", "-c", line], env=env, cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        print(f"$ {line}\n{r.stdout}")
        if r.returncode != 0:
            fail(f"'{line}' exited {r.returncode}")
        if "slurm/submit.sh" in line:
            jobs.append(submitted_id(r.stdout))
    for job in jobs:
        slurm.wait_gone(job, 540 - (time.time() - start))
    print(f"the try-it lines ran in {time.time() - start:.0f} s")
    ci_job, array = jobs
    ci_log = os.path.join(clone, "results", f"crl-{ci_job}.log")
    logs = [ci_log] + [os.path.join(clone, "results", f"eval-{array}_{i}.log") for i in range(3)]
    for log in logs:
        if not os.path.exists(log):
            fail(f"no log {log}")
    if slurm.job(ci_job).get("JobState") != "COMPLETED" or "] done" not in read(ci_log):
        fail(f"the CI job ended {slurm.job(ci_job).get('JobState')}:\n{read(ci_log)}")
    if not os.path.exists(os.path.join(clone, "results", f"crl-{ci_job}", "results.h5")):
        fail("the CI job wrote no results.h5")
    for i in range(3):
        if not os.path.exists(os.path.join(clone, "results", f"eval-{array}", "part-%04d.done" % i)):
            fail(f"slice {i} of the eval array is not done:\n{read(logs[i + 1])}")
    print("docs/slurm.md's try-it lines: model made, the CI job and the eval array done, logs in results/")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=["start", "stop", "eval_array", "script_stops", "job_preempt", "job_kill",
                                                         "job_early_stop", "submit_outside", "docs_try_it"])
    ap.add_argument("--crl", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=280, help="seconds the case may take (below ctest's TIMEOUT)")
    args = ap.parse_args()
    args.crl = os.path.abspath(args.crl)  # commands run in the work folder
    state = os.path.join(os.path.dirname(args.work.rstrip("/")), "slurm-state")
    slurm = Slurm(state, args.work, args.crl, time.time() + args.budget)

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
    cases = {"eval_array": case_eval_array, "script_stops": case_script_stops, "job_preempt": case_job_preempt,
             "job_kill": case_job_kill, "job_early_stop": case_job_early_stop, "submit_outside": case_submit_outside,
             "docs_try_it": case_docs_try_it}
    cases[args.case](slurm, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
