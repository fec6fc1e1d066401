#!/usr/bin/env python3
"""Stops keep work, always (issue 43 item 1; ctest job_stop_*, CPU). tests/job/stops.yaml (1 trainer,
1 evaluator, sft then 6 crl steps) run the ways a user starts it, stopped the ways users, mpirun and
Slurm stop it. Each case ends with the same command run to the end: every step of the job and every
rollout of its crl stage once among the rows that count (not superseded).
Cases (--case):
  by_hand     `crl run JOB.yaml` (crl starts mpirun itself): SIGINT to its process group (a
              terminal's Ctrl-C) in the crl stage -> exit 5, `stopped at crl step N`, a checkpoint;
              the same command resumes; SIGTERM to crl alone -> exit 5 again; the same command ends it.
  early       under the user's `mpirun -np 2 crl run JOB.yaml`: SIGUSR1 to each rank as soon as it
              blocks or catches SIGUSR1, still one thread (before LibTorch or MPI start theirs): exit 5,
              `stopped before the first step`, no rank killed (once exit 138); then the issue's line,
              SIGUSR1 to mpirun 1.5 s after it starts: exit 5; rank 0 warned of mpirun's 1 s grace.
  grace       `mpirun --mca odls_base_sigkill_timeout 5 ...` and 100 crl steps: SIGTERM to mpirun in the
              crl stage -> `stopped at crl step N (SIGTERM)` and a checkpoint (Open MPI 4.1 sends the
              ranks SIGTERM 5 s after its own and SIGKILL 5 s after that; mpirun exits 1 whatever the
              ranks return).
  time        `checkpoint.every_minutes` -1: exit 3 naming it. Tiny: SIGKILL to every process of the job in the crl stage
              (what a launcher's kill leaves no time to stop for); the same command resumes from a
              checkpoint written by time inside the crl stage, not from the sft stage's end.
  default     the built-in default job (`crl run` alone), SIGINT to its process group in stage 1:
              exit 5 and `stopped; run the same command to resume` (it once said `the default job
              failed`, exit 1); the same command resumes from the checkpoint, and stops again.
Usage: stops_test.py --case NAME --crl build/apps/crl/crl --work DIR
"""
import glob
import os
import re
import signal
import subprocess
import threading
import time

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, descendants, fail

JOB = os.path.join(REPO, "tests", "job", "stops.yaml")
CRL_STEPS = 6
CRL_ROLLOUTS = CRL_STEPS * 2 * 2  # batch 2, G 2


def status_field(pid, field):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return line.split()[1]
    except OSError:
        return None
    return None


class Job:
    """One crl command, its output read line by line; `on_line(pattern, act)` acts once when a line matches."""

    def __init__(self, args, command):
        self.args = args
        self.command = command
        env = dict(os.environ)
        env.update(MPIRUN_ENV)
        env.pop("CRL_STOPS_FORWARDED", None)
        self.env = env

    def run(self, when=None, act=None, at_start=None, timeout=900):
        """Runs the command; `at_start(proc)` as soon as it started, `act(proc)` at the first line matching `when`.
        Returns (exit code, output)."""
        proc = subprocess.Popen(self.command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        if at_start:
            at_start(proc)
        lines, acted = [], False
        deadline = time.time() + timeout
        for line in proc.stdout:
            lines.append(line)
            if when and not acted and re.search(when, line):
                act(proc)
                acted = True
            if time.time() > deadline:
                for pid in list(descendants(proc.pid)) + [proc.pid]:
                    os.kill(pid, signal.SIGKILL)
                fail(f"{self.command} ran past {timeout} s")
        code = proc.wait()
        output = "".join(lines)
        print(f"$ {' '.join(self.command)}\n  exit {code}{' (acted)' if acted else ''}")
        if when and not acted:
            fail(f"no line matched {when!r}: {output[-3000:]}")
        return code, output


def crl_step_line(n):
    """Rank 0's progress line of the crl stage's n-th step (1-based)."""
    return rf"\[crl\] step \d+ \({n}/{CRL_STEPS}\)"


def checkpoints(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step-*", "DONE")))


def expect_stopped(code, output, run_dir, what, message=r"stopped at crl step \d+", codes=(5,)):
    if code not in codes or not re.search(message, output):
        fail(f"{what}: exit {code} (expected {codes}), /{message}/ {'' if re.search(message, output) else 'not '}logged:\n"
             f"{output[-4000:]}")
    if not checkpoints(run_dir):
        fail(f"{what}: no finished checkpoint in {run_dir}/checkpoints")
    if os.path.exists(os.path.join(run_dir, "finished.json")):
        fail(f"{what}: a stopped job left {run_dir}/finished.json, the mark of a job run to its end")


def expect_complete_rows(run_dir, crl_steps=CRL_STEPS):
    """Every job step once among the rows that count, and every crl rollout once."""
    import h5py
    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps, stages = f["steps/step"][:], f["steps/stage"][:]
        kept = [(int(s), g.decode() if isinstance(g, bytes) else str(g))
                for s, g, x in zip(steps, stages, f["steps/superseded"][:]) if not x]
        numbers = sorted(s for s, _ in kept)
        if numbers != list(range(len(numbers))):
            fail(f"the steps that count are not 0..N-1 each once: {numbers}")
        if sum(1 for _, g in kept if g == "crl") != crl_steps:
            fail(f"{crl_steps} crl steps expected among {kept}")
        r = f["rollouts"]
        keys = [(int(s), int(g), int(m)) for s, g, m, x in zip(r["step"][:], r["group"][:], r["sample"][:], r["superseded"][:])
                if not x]
        rollouts = crl_steps * CRL_ROLLOUTS // CRL_STEPS
        if len(keys) != rollouts or len(set(keys)) != len(keys):
            fail(f"{len(keys)} rollouts count ({len(set(keys))} distinct), {rollouts} expected")
    print(f"  rows: {len(numbers)} steps and {len(keys)} rollouts, each once")


def finish(args, command, run_dir, resumed_from=r"resuming from \S+ \(crl step \d+\)", crl_steps=CRL_STEPS):
    code, output = Job(args, command).run()
    if code != 0 or not re.search(resumed_from, output):
        fail(f"the same command again: exit {code}, /{resumed_from}/ {'' if re.search(resumed_from, output) else 'not '}logged:\n"
             f"{output[-4000:]}")
    expect_complete_rows(run_dir, crl_steps)
    return output


def case_by_hand(args, model):
    run_dir = os.path.join(args.work, "by_hand")
    command = [args.crl, "run", JOB, "--model", model, "--run-dir", run_dir]
    code, output = Job(args, command).run(crl_step_line(2), lambda p: os.killpg(p.pid, signal.SIGINT))
    expect_stopped(code, output, run_dir, "SIGINT to the process group of crl run")
    if "SIGINT: the ranks stop at the next step boundary" not in output:
        fail("crl run did not say what it did with the SIGINT")
    code, output = Job(args, command).run(crl_step_line(4), lambda p: os.kill(p.pid, signal.SIGTERM))
    expect_stopped(code, output, run_dir, "SIGTERM to crl run")
    finish(args, command, run_dir)


def signal_ranks_at_start(proc, sent):
    """SIGUSR1 to each rank (a crl or crl-main below mpirun) at the first moment it guards against it:
    blocked (build/apps/crl/crl blocks it across the exec and LibTorch's load) or caught (the handler
    installed before LibTorch's initialisers). Appends (threads, "blocked" or "caught") per rank."""
    done = set()
    bit = 1 << (signal.SIGUSR1 - 1)
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline and len(done) < 2:
        for pid in descendants(proc.pid):
            if pid in done:
                continue
            try:
                if os.path.basename(os.readlink(f"/proc/{pid}/exe")) not in ("crl", "crl-main"):
                    continue
            except OSError:
                continue
            blocked, caught, threads = (status_field(pid, f) for f in ("SigBlk", "SigCgt", "Threads"))
            if blocked is None or caught is None:
                continue
            if not (int(blocked, 16) & bit or int(caught, 16) & bit):
                continue
            os.kill(pid, signal.SIGUSR1)
            done.add(pid)
            sent.append((int(threads), "blocked" if int(blocked, 16) & bit else "caught"))
        time.sleep(0.0005)


def case_early(args, model):
    run_dir = os.path.join(args.work, "early")
    command = [args.mpirun, "-np", "2", args.crl, "run", JOB, "--model", model, "--run-dir", run_dir]
    sent = []
    watchers = []

    def watch(p):
        watchers.append(threading.Thread(target=signal_ranks_at_start, args=(p, sent)))
        watchers[0].start()

    code, output = Job(args, command).run(at_start=watch)
    watchers[0].join()
    print(f"  SIGUSR1 sent to {len(sent)} rank(s), at (threads, guard) {sent}")
    if len(sent) != 2 or max(t for t, _ in sent) != 1:
        fail(f"the ranks were not signalled while one thread each (threads at the signal: {sent}): {output[-3000:]}")
    if code != 5 or "stopped before the first step (SIGUSR1" not in output:
        fail(f"SIGUSR1 to the ranks at their start: exit {code} (expected 5, once 138), no 'stopped before the first step':\n"
             f"{output[-4000:]}")
    if "kills the ranks about 2 s later" not in output:
        fail("rank 0 did not warn of mpirun's 1 s grace after SIGINT or SIGTERM")
    if glob.glob(os.path.join(run_dir, "checkpoints", "step-*")):
        fail("a stop before the first step wrote a checkpoint")
    # The line: SIGUSR1 to mpirun 1.5 s after it starts.
    code, output = Job(args, command).run(at_start=lambda p: threading.Timer(1.5, os.kill, (p.pid, signal.SIGUSR1)).start())
    if code != 5 or not re.search(r"stopped (before the first step|at \S+ step \d+) \(SIGUSR1", output):
        fail(f"SIGUSR1 to mpirun after 1.5 s: exit {code} (expected 5, once 138):\n{output[-4000:]}")
    code, output = Job(args, command).run()
    if code != 0:
        fail(f"the same command after the early stops: exit {code}:\n{output[-4000:]}")
    expect_complete_rows(run_dir)


def case_grace(args, model):
    run_dir = os.path.join(args.work, "grace")
    command = [args.mpirun, "--mca", "odls_base_sigkill_timeout", "5", "-np", "2", args.crl, "run", JOB, "--model", model,
               "--run-dir", run_dir, "--set", "stages.1.steps=100"]
    code, output = Job(args, command).run(r"\[crl\] step \d+ \(2/100\)", lambda p: os.kill(p.pid, signal.SIGTERM))
    expect_stopped(code, output, run_dir, "SIGTERM to mpirun with a 5 s grace", r"stopped at crl step \d+ \(SIGTERM\)", (1, 5))
    if "kills the ranks about 2 s later" in output:
        fail("rank 0 warned of a short grace that --mca odls_base_sigkill_timeout raised")
    finish(args, command, run_dir, crl_steps=100)


def case_time(args, model):
    run_dir = os.path.join(args.work, "time")
    command = [args.crl, "run", JOB, "--model", model, "--run-dir", run_dir, "--set", "stages.1.checkpoint.every_minutes=0.0001"]
    # A bad value is bad input (exit 3) naming the key, before any rank starts.
    bad = subprocess.run(command[:-1] + ["stages.1.checkpoint.every_minutes=-1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=120)
    if bad.returncode != 3 or "stages[1].checkpoint.every_minutes' is -1" not in bad.stdout:
        fail(f"checkpoint.every_minutes -1: exit {bad.returncode} (expected 3):\n{bad.stdout[-2000:]}")

    def kill_everything(p):
        for pid in list(descendants(p.pid)) + [p.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    code, output = Job(args, command).run(crl_step_line(4), kill_everything)
    if "(checkpoint.every_minutes)" not in output:
        fail(f"no checkpoint by time was logged:\n{output[-4000:]}")
    sft_steps = int(re.search(r"\[sft\] step \d+ \((\d+)/(\d+)\)", output).group(2))
    output = finish(args, command, run_dir)
    resumed = int(re.search(r"resuming from \S+ \(crl step (\d+)\)", output).group(1))
    if resumed <= sft_steps:
        fail(f"resumed at job step {resumed}, the crl stage's first ({sft_steps}): no checkpoint by time was used")
    print(f"  resumed at job step {resumed} (the crl stage starts at {sft_steps})")


def case_default(args, model):
    run_dir = os.path.join(args.work, "default")
    command = [args.crl, "run", "--run-dir", run_dir]
    ctrl_c = lambda p: os.killpg(p.pid, signal.SIGINT)  # noqa: E731
    for attempt, line in enumerate((r"\[sft\] step 3 ", r"resuming from \S+ \(sft step \d+\)")):
        code, output = Job(args, command).run(line, ctrl_c)
        expect_stopped(code, output, run_dir, f"SIGINT to the default job ({attempt + 1})", r"stopped (at sft step \d+|before the first step) \(SIGUSR1")
        if "stopped; run the same command to resume" not in output or "the default job failed" in output:
            fail(f"the default job's stop was not reported as one:\n{output[-3000:]}")


def main():
    prepared = job_test_setup.prepare(quiet=True, add_arguments=lambda ap: ap.add_argument("--case", required=True))
    if prepared is None:
        return 0
    args, model = prepared
    cases = {"by_hand": case_by_hand, "early": case_early, "grace": case_grace, "time": case_time, "default": case_default}
    cases[args.case](args, model)
    print("PASS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
