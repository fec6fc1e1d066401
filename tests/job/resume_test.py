#!/usr/bin/env python3
"""Stop and resume of `crl run` (ctest job_resume, CPU; the contract: docs/training.md, "Stopping
and resuming"). The job tests/job/resume_overlap.yaml (2 trainers, 2 evaluators, LoRA, sft, crl on-policy,
crl with max_staleness 1, deterministic updates) runs four ways in one run folder and once straight
through in another:
  1. SIGUSR1 to the job's process group and to every process of the job (as Slurm's scancel
     --signal does: crl-worker and compiler processes too) while a candidate is being evaluated:
     every rank exits 5, logging where it stopped; the candidate's verdict is still ok;
  2. the same command with lr changed: refused (exit 3), naming the key stages[1].lr;
  3. the same command resumes from the stop's checkpoint; SIGTERM to a trainer rank stops it again,
     in the staleness-1 stage with a generated step in flight;
  4. that checkpoint corrupted and a newer unfinished one beside it: both skipped, each named, the
     run resumes from an older checkpoint (in the staleness-1 stage: its in-flight step is judged,
     not generated again), re-does the steps after it (their rows marked superseded) and completes.
Then: the final weights (base and adapters) are bitwise those of the uninterrupted run, and the
rows that count (not superseded) of /steps and /rollouts, and the completions, equal its rows; the
rollouts' policy versions lag their update by exactly one in the staleness-1 stage (but its first
step) and by none before; each crl stage's KL reference is the checkpoint the stage before it ended
with, resumed or not; peft loads the final LoRA adapter (when installed) and computes what the
merged model does. Last, kill -9 of an evaluator, of a trainer and of rank 0 each ends a run with a
message naming that rank, its role and its host.
Usage: resume_test.py --crl build/apps/crl/crl --work DIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, descendants, fail
JOB = os.path.join(REPO, "tests", "job", "resume_overlap.yaml")
SFT_STEPS, CRL0_STEPS, CRL1_STEPS = 4, 4, 6  # the job's stages (crl0: on-policy; crl1: max_staleness 1)
CRL1_FIRST = SFT_STEPS + CRL0_STEPS  # the job step where the staleness-1 stage starts
# Columns that depend on time or on which evaluator took a program, not on the computation.
UNTIMED_STEP_COLUMNS = ["step", "stage", "policy_version", "loss", "grad_norm", "lr", "skipped", "reward_mean",
                        "reward_median", "reward_max", "n_ok", "n_format_error", "n_crash", "tokens_generated",
                        "tokens_trained"]
UNTIMED_ROLLOUT_COLUMNS = ["step", "stage", "task", "group", "sample", "status", "speedup", "reward",
                           "normalized_reward", "advantage", "completion_tokens", "exemplar_ids", "policy_version"]


def job_copy(path, lr=None):
    """The job file with its paths made absolute (so the copy may live anywhere), the first crl stage's lr
    optionally changed."""
    text = open(JOB).read()
    text = text.replace("../../", REPO + "/").replace("../data/", REPO + "/tests/data/")
    if lr is not None:
        text, n = re.subn(r"(- kind: crl\n(?:    .*\n)*?    lr: )\S+", lambda m: m.group(1) + lr, text, count=1)
        if n != 1:
            fail("could not change the crl stage's lr in the job copy")
    with open(path, "w") as f:
        f.write(text)
    return path


def signal_whole_job_while_evaluating(proc, signo, sent):
    """Once a crl-worker runs under `proc` (a candidate is being evaluated, mid-step), sends `signo`
    to proc's process group and to every process below it, as Slurm's scancel --signal does."""
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        below = descendants(proc.pid)
        if any(name.startswith("crl-worker") for name in below.values()):
            os.killpg(proc.pid, signo)
            for pid in below:
                try:
                    os.kill(pid, signo)
                except OSError:
                    pass
            sent.append(sorted(set(below.values())))
            return
        time.sleep(0.01)


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

    def run(self, job, run_dir, extra=(), stop_at=None, whole_job_signal=None):
        """Runs the job; with stop_at=(line pattern, rank, signal) sends the signal to that rank once
        rank 0 logs a matching line; with whole_job_signal, sends it to the whole job once a
        candidate is being evaluated (signal_whole_job_while_evaluating). Returns (exit code, output)."""
        start = time.time()
        proc = subprocess.Popen(self.command(job, run_dir, extra), env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        group_sent = []
        if whole_job_signal:
            watcher = threading.Thread(target=signal_whole_job_while_evaluating, args=(proc, whole_job_signal, group_sent))
            watcher.start()
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
        if whole_job_signal:
            watcher.join()
            if not group_sent:
                fail("no crl-worker ever ran, so no signal was sent to the whole job")
            print(f"signal {whole_job_signal} went to the process group and to: {', '.join(group_sent[0])}")
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


def kl_references(output):
    """{stage number: the KL reference's folder} from rank 0's log."""
    return {int(n): os.path.basename(d) for n, d in re.findall(r"stage (\d+): KL reference: the weights it started from, (\S+)", output)}


def check_policy_versions(steps, rollouts):
    """On-policy steps' rollouts come from the policy before their update; in the staleness-1 stage
    (but its first step) from the policy before the previous step's update: one version behind."""
    c_steps, c_rollouts = counted(steps), counted(rollouts)
    before, version = {}, 0
    for step, skipped in zip(c_steps["step"], c_steps["skipped"]):
        before[step] = version
        version += 0 if skipped else 1
    for step, v in zip(c_rollouts["step"], c_rollouts["policy_version"]):
        stale = step > CRL1_FIRST
        expected = before[step - 1] if stale else before[step]
        if v != expected:
            fail(f"a rollout of step {step} has policy version {v}, expected {expected} "
                 f"({'staleness 1' if stale else 'on-policy'})")
        if stale and before[step] - v != 1:
            fail(f"a rollout of step {step} lags its update by {before[step] - v} versions, expected 1")


def check_peft_loads(python, checkpoint, base):
    """peft loads the checkpoint's adapter onto the base model and computes what the checkpoint's
    merged model (the adapted model crl trained) computes."""
    code = (
        "import sys, torch, transformers, peft\n"
        "ids = torch.tensor([[5, 17, 42, 7, 99, 3, 11]])\n"
        "base = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32).eval()\n"
        "with torch.no_grad():\n"
        "    plain = base(ids).logits\n"
        "m = peft.PeftModel.from_pretrained(base, sys.argv[1] + '/adapter').eval()\n"
        # the checkpoint folder as transformers loads it: the merged model (the adapter has its own folder)
        "merged = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()\n"
        "with torch.no_grad():\n"
        "    a, b = m(ids).logits, merged(ids).logits\n"
        "d, moved = (a - b).abs().max().item(), (a - plain).abs().max().item()\n"
        "print('peft vs merged: max abs difference', d, '; the adapter moves the logits by', moved)\n"
        "sys.exit(0 if d < 1e-4 and moved > 1e-3 else 1)\n")
    r = subprocess.run([python, "-c", code, checkpoint, base], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-2000:])
    if r.returncode != 0:
        fail(f"peft could not load the adapter of {checkpoint}, or it computes other logits than the merged model")


def main():
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    args, model = prepared
    job = job_copy(os.path.join(args.work, "resume.yaml"))
    changed = job_copy(os.path.join(args.work, "changed.yaml"), lr="2.0e-3")
    runner = Runner(args, model)
    straight, stopped = os.path.join(args.work, "straight"), os.path.join(args.work, "stopped")
    code, straight_out = runner.run(job, straight)
    if code != 0:
        fail(f"the uninterrupted run exited {code}")
    expected_references = {2: "step-%08d" % SFT_STEPS, 3: "step-%08d" % CRL1_FIRST}
    if kl_references(straight_out) != expected_references:
        fail(f"KL references {kl_references(straight_out)}, expected the stage-end checkpoints {expected_references}")

    # 1. SIGUSR1 to the whole job (process group and every process) while the planted candidate of
    #    the first crl step is being evaluated.
    code, out = runner.run(job, stopped, whole_job_signal=signal.SIGUSR1)
    if code != 5:
        fail(f"a run stopped by SIGUSR1 to the whole job exited {code}, expected 5")
    first_stop = stopped_step(out, "SIGUSR1")
    if not SFT_STEPS <= first_stop < CRL1_FIRST - 1:
        fail(f"stopped at step {first_stop}, not inside the first crl stage")
    if not os.path.exists(os.path.join(stopped, "checkpoints", "step-%08d" % (first_stop + 1), "DONE")):
        fail(f"no finished checkpoint after the stop at step {first_stop}")
    import h5py
    with h5py.File(os.path.join(stopped, "results.h5"), "r") as f:
        planted = [st for st, t, sm, step in zip(f["rollouts/status"].asstr()[:], f["rollouts/task"].asstr()[:],
                                                 f["rollouts/sample"][:], f["rollouts/step"][:])
                   if step == SFT_STEPS and t == "level1/019_relu" and sm == 0]
    if planted != ["ok"]:
        fail(f"the candidate evaluated when the signal came got {planted}, expected ok (did its worker die?)")

    # 2. A changed key is refused, naming it.
    code, out = runner.run(changed, stopped)
    if code != 3 or "stages[1].lr" not in out or "--allow-config-change" not in out:
        fail(f"a changed lr: exit {code}, expected 3 and a message naming stages[1].lr")

    # 3. Resume from the stop's checkpoint; SIGTERM to trainer rank 1 stops it again, in the
    #    staleness-1 stage after its first periodic checkpoint.
    code, out = runner.run(job, stopped, stop_at=(r"\[crl\] step %d " % (CRL1_FIRST + 3), 1, signal.SIGTERM))
    if f"crl step {first_stop + 1})" not in out or "resuming from" not in out:
        fail(f"the resumed run did not log resuming at crl step {first_stop + 1}")
    if code != 5:
        fail(f"the resumed run stopped by SIGTERM exited {code}, expected 5")
    if kl_references(out) != expected_references:
        fail(f"the resumed run's KL references are {kl_references(out)}, expected {expected_references}")
    second_stop = stopped_step(out, "SIGTERM")
    if not CRL1_FIRST + 3 <= second_stop < CRL1_FIRST + CRL1_STEPS - 1:
        fail(f"the second stop ({second_stop}) is not inside the staleness-1 stage after step {CRL1_FIRST + 3}")

    # 4. The newest checkpoint corrupted, an unfinished newer one beside it: both skipped.
    root = os.path.join(stopped, "checkpoints")
    newest = os.path.join(root, "step-%08d" % (second_stop + 1))
    if not os.path.exists(os.path.join(newest, "DONE")):
        fail(f"no finished checkpoint {newest} after the second stop: {sorted(os.listdir(root))}")
    unfinished = os.path.join(root, "step-%08d" % (second_stop + 2))
    shutil.copytree(newest, unfinished)
    os.remove(os.path.join(unfinished, "DONE"))
    weights = os.path.join(newest, "adapter", "adapter_model.safetensors")
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
    resumed_at = re.search(r"resuming from \S+ \(crl step (\d+)\)", out)
    if not resumed_at or not CRL1_FIRST < int(resumed_at.group(1)) <= second_stop:
        fail("the last resume did not resume inside the staleness-1 stage")
    if not re.search(r"step %s generated before the checkpoint .* is judged now" % resumed_at.group(1), out):
        fail("the last resume did not take the in-flight step from the checkpoint")

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
    import h5py
    with h5py.File(os.path.join(stopped, "results.h5"), "r") as f:
        meta_restarts = int(f["meta"].attrs["restarts"])
    if meta_restarts != max(b_rollouts["restart"]) or meta_restarts != max(b_steps["restart"]):
        fail(f"/meta restarts is {meta_restarts}, the rows' largest restart {max(b_steps['restart'])}")
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
    a_all_steps, a_all_rollouts, _, _ = read(os.path.join(straight, "results.h5"))
    check_policy_versions(a_all_steps, a_all_rollouts)
    check_policy_versions(*read(os.path.join(stopped, "results.h5"))[:2])
    for d in expected_references.values():
        if not os.path.exists(os.path.join(stopped, "checkpoints", d, "DONE")):
            fail(f"the KL reference {d} was pruned")
    final = sorted(d for d in os.listdir(os.path.join(straight, "checkpoints")) if d.startswith("step-"))[-1]
    try:
        subprocess.run([sys.executable, "-c", "import peft, transformers"], check=True, stderr=subprocess.DEVNULL)
        check_peft_loads(sys.executable, os.path.join(straight, "checkpoints", final), model)
    except subprocess.CalledProcessError:
        print("peft or transformers is not installed in", sys.executable, "- not checking that peft loads the adapter")
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
