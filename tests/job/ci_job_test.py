#!/usr/bin/env python3
"""The CI job end to end (ctest job_ci, CPU): a tiny model from `crl init-model`, then
`mpirun -np 4 --oversubscribe crl run jobs/ci.yaml` (2 trainers, 2 evaluators, stages sft then crl
on 3 small tasks), then checks the results file with h5py:
  - /steps has the sft and crl steps, /rollouts every rollout with unique ids, the texts are there;
  - both trainers' weights are bitwise equal (their SHA-256 in /meta trainer_weight_sha256);
  - the planted crashing, hanging and hacking programs got crash, timeout and hack (or mismatch)
    verdicts, the planted correct one got ok, and every other rollout kept its own verdict;
  - the correct program became an exemplar that the second crl step's ReLU prompt shows;
  - 2 ranks for 2 trainers and a crl stage is refused with a message saying what to change;
  - `crl data validate` keeps the 4 correct programs of the SFT data, with their speedups.
Usage: ci_job_test.py --crl build/apps/crl/crl --work DIR
"""
import json
import os
import re
import subprocess
import sys
import time

import job_test_setup
from job_test_setup import MPIRUN_ENV, REPO, fail


def main():
    prepared = job_test_setup.prepare(quiet=False)
    if prepared is None:
        return 0
    args, model = prepared
    import h5py  # present: prepare() checked
    run_dir = os.path.join(args.work, "run")
    env = dict(os.environ)
    env.update(MPIRUN_ENV)
    command = [args.mpirun, "-np", "4", "--oversubscribe", args.crl, "run", os.path.join(REPO, "jobs", "ci.yaml"),
               "--model", model, "--run-dir", run_dir]
    start = time.time()
    job = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    print(job.stdout)
    print(f"crl run took {time.time() - start:.1f} s")
    if job.returncode != 0:
        fail(f"crl run exited {job.returncode}")
    # The mark slurm/crl.sbatch reads to tell a job run to its end from a step that never ran.
    mark = os.path.join(run_dir, "finished.json")
    if not os.path.exists(mark) or json.load(open(mark)).get("job") != "ci":
        fail(f"{mark} was not written as the job ended")

    with h5py.File(os.path.join(run_dir, "results.h5"), "r") as f:
        steps = {k: f["steps"][k][:] for k in f["steps"].attrs["crl_columns"]}
        stages = [s.decode() if isinstance(s, bytes) else s for s in f["steps/stage"].asstr()[:]]
        if stages != ["sft", "sft", "crl", "crl"]:
            fail(f"/steps stages are {stages}")
        if list(steps["step"]) != [0, 1, 2, 3]:
            fail(f"/steps steps are {list(steps['step'])}")
        r = f["rollouts"]
        ids = list(r["rollout_id"][:])
        if len(ids) != 2 * 3 * 4 or len(set(ids)) != len(ids):
            fail(f"expected 24 unique rollout ids, got {ids}")
        status = list(r["status"].asstr()[:])
        task = list(r["task"].asstr()[:])
        step = list(r["step"][:])
        group = list(r["group"][:])
        sample = list(r["sample"][:])
        shown = list(r["exemplar_ids"].asstr()[:])
        by_key = {(step[i], task[i], sample[i]): i for i in range(len(ids))}
        first_crl = 2
        planted = {0: ("crash",), 1: ("timeout",), 2: ("hack:output_cache", "mismatch"), 3: ("ok",)}
        for s, expected in planted.items():
            i = by_key[(first_crl, "level1/019_relu", s)]
            if status[i] not in expected:
                log = f["text/logs/text"].asstr()[list(f["text/logs/id"][:]).index(ids[i])]
                fail(f"planted sample {s} has status {status[i]}, expected {expected}; log: {log[:2000]}")
        # Each judged task drew a fresh secret, which its rollouts' logs name (the judge step), never
        # one the job file fixes: the job's seed made it seed + 1 (2 here) for every task of every
        # run, and whoever knows the secret knows the slots checked after each timed pair
        # (AttackTest.AKnownSecretNamesTheCheckedSlots).
        log_ids = list(f["text/logs/id"][:])
        logs = f["text/logs/text"].asstr()
        for s in planted:
            log = logs[log_ids.index(ids[by_key[(first_crl, "level1/019_relu", s)]])]
            found = re.search(r"--- judge\n.*? from secret (\d+)", log)
            if not found:
                fail(f"planted sample {s}'s log names no judge secret: {log[:1000]}")
            if int(found.group(1)) == 2:
                fail(f"planted sample {s} was judged under secret 2, the job's seed + 1: a secret the job file names")
        # The roofline's columns: the timed ok program's medians and every rollout's scale.
        ok_row = by_key[(first_crl, "level1/019_relu", 3)]
        if not (r["candidate_median_us"][ok_row] > 0 and r["reference_median_us"][ok_row] > 0):
            fail(f"the ok rollout's medians are {r['candidate_median_us'][ok_row]} and {r['reference_median_us'][ok_row]} us")
        if set(r["scale"].asstr()[:]) != {"small"}:
            fail(f"/rollouts scale holds {set(r['scale'].asstr()[:])}, expected the job's small")
        # Every other rollout has its own verdict: the tiny model's text holds no program.
        for i in range(len(ids)):
            if task[i] == "level1/019_relu" and step[i] == first_crl:
                continue
            if status[i] != "format_error":
                fail(f"rollout {ids[i]} ({task[i]}, step {step[i]}) has status {status[i]}, expected format_error")
        n_ok = int(steps["n_ok"][2]) + int(steps["n_crash"][2]) + int(steps["n_timeout"][2])
        if n_ok != 3 or int(steps["n_format_error"][2]) != 8:
            fail(f"step 2 counts: {[(k, int(v[2])) for k, v in steps.items() if k.startswith('n_')]}")
        # The correct planted program is the exemplar of the next step's ReLU prompt.
        ok_id = ids[by_key[(first_crl, "level1/019_relu", 3)]]
        relu_next = [i for i in range(len(ids)) if step[i] == first_crl + 1 and task[i] == "level1/019_relu"]
        if not relu_next or any(shown[i] != str(ok_id) for i in relu_next):
            fail(f"step 3's ReLU prompts show exemplars {[shown[i] for i in relu_next]}, expected {ok_id}")
        prompt_ids = list(f["text/prompts/id"][:])
        prompt = f["text/prompts/text"].asstr()[prompt_ids.index(ids[relu_next[0]])]
        if "Program A (speedup" not in prompt:
            fail("the ReLU prompt of step 3 does not show its exemplar")
        for store in ("prompts", "completions", "logs"):
            if len(f[f"text/{store}/id"]) != len(ids):
                fail(f"/text/{store} has {len(f[f'text/{store}/id'])} texts for {len(ids)} rollouts")
        meta = f["meta"].attrs
        hashes = json.loads(meta["trainer_weight_sha256"])
        if len(hashes) != 2 or hashes[0] != hashes[1]:
            fail(f"trainers' weights differ: {hashes}")
        for key in ("job_config", "git_commit", "hosts", "gpu_names", "versions", "share_gpu"):
            if key not in meta:
                fail(f"/meta lacks {key}")
        if not all(v >= 0 for v in steps["evaluator_busy_fraction"]):
            fail("negative evaluator busy fraction")
        if steps["evaluator_busy_fraction"][2] <= 0:
            fail("the evaluators were never busy in the first crl step")

    # T checked against the world size: 2 trainers and no evaluator is refused, saying what to change.
    short = subprocess.run([args.mpirun, "-np", "2", "--oversubscribe", args.crl, "run", os.path.join(REPO, "jobs", "ci.yaml"),
                            "--model", model, "--run-dir", os.path.join(args.work, "short")],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if short.returncode == 0 or "roles.trainers is 2 but the job runs 2 MPI rank(s)" not in short.stdout:
        fail(f"2 ranks for 2 trainers and a crl stage: exit {short.returncode}, output {short.stdout[-2000:]}")

    # crl data validate keeps the correct programs of the CI job's SFT data, with their speedups.
    kept = os.path.join(args.work, "validated.jsonl")
    validate = subprocess.run([args.crl, "data", "validate", os.path.join(REPO, "jobs", "data", "ci_sft.jsonl"), "--out", kept,
                               "--backend", "cpu", "--trials", "1", "--time-budget", "0.2", "--max-relative-ci", "1", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if validate.returncode != 0:
        fail(f"crl data validate exited {validate.returncode}: {validate.stderr[-2000:]}")
    report = json.loads(validate.stdout)
    lines = [json.loads(l) for l in open(kept)]
    if report["kept"] != 4 or len(lines) != 4 or not all(l["speedup"] > 0 and "```" in l["completion"] for l in lines):
        statuses = [(l["id"], l["status"], l["speedup"]) for l in report["lines"]]
        fail(f"crl data validate kept {report['kept']} of {report['total']}: {statuses}")
    print("ok: ci job results check out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
