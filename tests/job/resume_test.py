#!/usr/bin/env python3
"""Stop and resume of `crl run` (ctest job_resume, CPU; the contract: docs/training.md, "Stopping
and resuming"). The job tests/job/resume.yaml (2 trainers, 2 evaluators, sft then crl, deterministic
updates) runs four ways in one run folder and once straight through in another:
  1. SIGUSR1 to an evaluator rank mid-crl: every rank exits 5, logging where it stopped;
  2. the same command with lr changed: refused (exit 3), naming the key stages[1].lr;
  3. the same command resumes from the stop's checkpoint; SIGTERM to a trainer rank stops it again;
  4. that checkpoint corrupted and a newer unfinished one beside it: both skipped, each named, the
     run resumes from an older checkpoint, re-does the steps after it (their rows marked
     superseded) and completes (exit 0).
Then: the final weights are bitwise those of the uninterrupted run, and the rows that count (not
superseded) of /steps and /rollouts, and the completions, equal its rows. Last, kill -9 of an
evaluator, of a trainer and of rank 0 each ends a run with a message naming that rank, its role
and its host.
Usage: resume_test.py --crl build/apps/crl/crl --work DIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO
JOB = os.path.join(REPO, "tests", "job", "resume.yaml")
CRL_STEPS = 8  # steps of the job's crl stage
# Columns that depend on time or on which evaluator took a program, not on the computation.
UNTIMED_STEP_COLUMNS = ["step", "stage", "policy_version", "loss", "grad_norm", "lr", "skipped", "reward_mean",
                        "reward_median", "reward_max", "n_ok", "n_format_error", "n_crash", "tokens_generated",
                        "tokens_trained"]
UNTIMED_ROLLOUT_COLUMNS = ["step", "stage", "task", "group", "sample", "status", "speedup", "reward",
                           "normalized_reward", "advantage", "completion_tokens", "exemplar_ids", "policy_version"]


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def job_copy(path, lr=None):
    """The job file with its paths made absolute (so the copy may live anywhere), lr optionally changed."""
    text = open(JOB).read()
    text = text.replace("../../", REPO + "/").replace("../data/", REPO + "/tests/data/")
    if lr is not None:
        text, n = re.subn(r"(- kind: crl\n(?:    .*\n)*?    lr: )\S+", lambda m: m.group(1) + lr, text)
        if n != 1:
            fail("could not change the crl stage's lr in the job copy")
    with open(path, "w") as f:
        f.write(text)
    return path


def rank_pid(run_dir, rank):
    """The pid of world rank `rank` of the crl run writing to run_dir (from /proc)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if run_dir.encode() not in cmdline or b"run" not in cmdline or b"mpirun" in cmdline[0]:
                continue
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return int(pid)
    return None


class Runner:
    def __init__(self, args, model):
        self.args = args
        self.model = model
        self.env = dict(os.environ)
        self.env.update(MPIRUN_ENV)

    def command(self, job, run_dir, extra=()):
        return [self.args.mpirun, "-np", "4", "--oversubscribe", self.args.crl, "run", job, "--model", self.model,
                "--run-dir", run_dir, *extra]

    def run(self, job, run_dir, extra=(), stop_at=None):
        """Runs the job; with stop_at=(line pattern, rank, signal) sends the signal to that rank once
        rank 0 logs a matching line. Returns (exit code, output)."""
        start = time.time()
        proc = subprocess.Popen(self.command(job, run_dir, extra), env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines = []
        sent = False
        for line in proc.stdout:
            lines.append(line)
            if stop_at and not sent and re.search(stop_at[0], line):
                pid = rank_pid(run_dir, stop_at[1])
                if pid is None:
                    proc.kill()
                    fail(f"no process of rank {stop_at[1]} found")
                os.kill(pid, stop_at[2])
                sent = True
        code = proc.wait(timeout=600)
        output = "".join(lines)
        print(output[-6000:])
        print(f"-> exit {code} after {time.time() - start:.1f} s")
        if stop_at and not sent:
            fail(f"the line {stop_at[0]!r} never came, so no signal was sent")
        return code, output


def read(path):
    import h5py
    with h5py.File(path, "r") as f:
        def table(name):
            out = {}
            for c in f[name].attrs["crl_columns"]:
                d = f[name][c]
                out[c] = list(d.asstr()[:]) if d.dtype.kind == "O" else list(d[:])
            return out
        texts = dict(zip(f["text/completions/id"][:], f["text/completions/text"].asstr()[:]))
        import json
        return table("steps"), table("rollouts"), texts, json.loads(f["meta"].attrs["trainer_weight_sha256"])


def counted(table):
    keep = [i for i, s in enumerate(table["superseded"]) if not s]
    return {c: [v[i] for i in keep] for c, v in table.items()}


def stopped_step(output, signame, how_many=4):
    found = re.findall(r"stopped at (\w+) step (\d+) \((\w+)\); run the same command to resume", output)
    if len(found) != how_many or any(f != found[0] for f in found):
        fail(f"expected {how_many} ranks to log the same stop line, got {found}")
    stage, step, name = found[0]
    if stage != "crl" or name != signame:
        fail(f"stopped at {stage} step {step} ({name}), expected a crl step and {signame}")
    return int(step)


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    job = job_copy(os.path.join(args.work, "resume.yaml"))
    changed = job_copy(os.path.join(args.work, "changed.yaml"), lr="2.0e-3")
    runner = Runner(args, model)
    straight, stopped = os.path.join(args.work, "straight"), os.path.join(args.work, "stopped")
    first_crl = 4  # after the 4 sft steps

    code, _ = runner.run(job, straight)
    if code != 0:
        fail(f"the uninterrupted run exited {code}")

    # 1. SIGUSR1 to evaluator rank 3 once the crl stage has done a step.
    code, out = runner.run(job, stopped, stop_at=(r"\[crl\] step \d+ \(1/%d\)" % CRL_STEPS, 3, signal.SIGUSR1))
    if code != 5:
        fail(f"a run stopped by SIGUSR1 exited {code}, expected 5")
    first_stop = stopped_step(out, "SIGUSR1")
    if not first_crl <= first_stop < first_crl + CRL_STEPS - 1:
        fail(f"stopped at step {first_stop}, not inside the crl stage")

    # 2. A changed key is refused, naming it.
    code, out = runner.run(changed, stopped)
    if code != 3 or "stages[1].lr" not in out or "--allow-config-change" not in out:
        fail(f"a changed lr: exit {code}, expected 3 and a message naming stages[1].lr")

    # 3. Resume from the stop's checkpoint; SIGTERM to trainer rank 1 stops it again.
    code, out = runner.run(job, stopped, stop_at=(r"\[crl\] step %d " % (first_stop + 1), 1, signal.SIGTERM))
    if f"crl step {first_stop + 1})" not in out or "resuming from" not in out:
        fail(f"the resumed run did not log resuming at crl step {first_stop + 1}")
    if code != 5:
        fail(f"the resumed run stopped by SIGTERM exited {code}, expected 5")
    second_stop = stopped_step(out, "SIGTERM")
    if second_stop <= first_stop:
        fail(f"the second stop ({second_stop}) is not after the first ({first_stop})")

    # 4. The newest checkpoint corrupted, an unfinished newer one beside it: both skipped.
    root = os.path.join(stopped, "checkpoints")
    newest = os.path.join(root, "step-%08d" % (second_stop + 1))
    if not os.path.exists(os.path.join(newest, "DONE")):
        fail(f"no finished checkpoint {newest} after the second stop: {sorted(os.listdir(root))}")
    unfinished = os.path.join(root, "step-%08d" % (second_stop + 2))
    shutil.copytree(newest, unfinished)
    os.remove(os.path.join(unfinished, "DONE"))
    weights = os.path.join(newest, "model.safetensors")
    with open(weights, "r+b") as f:
        f.seek(os.path.getsize(weights) - 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    code, out = runner.run(job, stopped)
    if code != 0:
        fail(f"the last resume exited {code}")
    for problem in (os.path.join(unfinished, "DONE") + ": missing", weights + ": SHA-256 differs"):
        if problem not in out:
            fail(f"the resume did not report the skipped checkpoint: {problem}")

    # The stopped-and-resumed run equals the uninterrupted one.
    a_steps, a_rollouts, a_texts, a_hashes = read(os.path.join(straight, "results.h5"))
    b_steps, b_rollouts, b_texts, b_hashes = read(os.path.join(stopped, "results.h5"))
    if len(set(a_hashes)) != 1 or a_hashes != b_hashes:
        fail(f"final weights differ: uninterrupted {a_hashes}, stopped and resumed {b_hashes}")
    superseded = sum(b_rollouts["superseded"])
    if superseded == 0 or sum(b_steps["superseded"]) == 0:
        fail("resuming from an older checkpoint marked no row superseded")
    if b_rollouts["rollout_id"] != list(range(len(b_rollouts["rollout_id"]))):
        fail("rollout ids are not unique row numbers after the restarts")
    if sorted(set(b_rollouts["restart"])) != [0, 1, 2]:
        fail(f"restart column holds {sorted(set(b_rollouts['restart']))}, expected 0, 1, 2")
    a_steps, b_counted = counted(a_steps), counted(b_steps)
    for c in UNTIMED_STEP_COLUMNS:
        if a_steps[c] != b_counted[c]:
            fail(f"/steps column {c} differs: uninterrupted {a_steps[c]}, resumed {b_counted[c]}")
    a_counted, b_counted = counted(a_rollouts), counted(b_rollouts)
    for c in UNTIMED_ROLLOUT_COLUMNS:
        if a_counted[c] != b_counted[c]:
            fail(f"/rollouts column {c} differs: uninterrupted {a_counted[c]}, resumed {b_counted[c]}")
    a_completions = [a_texts[i] for i in a_counted["rollout_id"]]
    b_completions = [b_texts[i] for i in b_counted["rollout_id"]]
    if a_completions != b_completions:
        fail("the completions differ")
    # A rank that dies ends the job, named with its role and host: an evaluator, a trainer, and
    # rank 0 (the coordinator, itself a trainer: the other trainer names it).
    for rank, role in ((3, "evaluator"), (1, "trainer"), (0, "trainer")):
        killed = os.path.join(args.work, f"killed-{rank}")
        code, out = runner.run(job, killed, stop_at=(r"\[sft\] step 1 \(2/4\)", rank, signal.SIGKILL))
        match = re.search(rf"rank {rank} \({role} on host (\S+), pid \d+\) died; ending the job", out)
        if code == 0 or not match or match.group(1) != os.uname().nodename:
            fail(f"kill -9 of {role} rank {rank}: exit {code}, and no message naming rank {rank}, its role and host "
                 f"{os.uname().nodename}")
    print(f"ok: stopped at steps {first_stop} and {second_stop}, resumed, {superseded} rollouts superseded; "
          f"weights and rows equal the uninterrupted run's; killed ranks 3, 1 and 0 were named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
