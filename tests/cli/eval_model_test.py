#!/usr/bin/env python3
"""`crl eval-model` as a user types it (ctest cli_eval_model, CPU; issue 43, item 4), on the tiny random
model (crl init-model) and two small level-1 tasks:
  - the results file: one /verdicts row per sample (candidate "sample S"), /samples with the sample
    index, the completions, /meta with the model and the sampling; the tiny model writes no program, so
    every completion is its own format_error verdict and the command still ends 0 with its summary;
  - `crl report` reads it: pass@k and fast_p over the level's tasks (KernelBench's denominator);
  - the file again without --resume is refused (exit 3); --resume judges nothing twice, and with more
    samples draws only the new ones, the same tokens a fresh run draws; another temperature is refused;
    --append adds samples numbered on from the file's;
  - bad input is exit 3 naming it (an unknown task, a level without tasks, a missing model folder).
Usage: eval_model_test.py --crl build/apps/crl/crl --work DIR
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "job"))
import job_test_setup  # noqa: E402
from job_test_setup import fail  # noqa: E402

TASKS = ["level1/019_relu", "level1/021_sigmoid"]
# Small and quick: 8 new tokens, one correctness trial, a 0.1 s timing budget.
SAMPLING = ["--max-new-tokens", "8", "--temperature", "1.0", "--seed", "5", "--backend", "cpu", "--trials", "1",
            "--time-budget", "0.1"]


def crl(args, *extra, expect=None):
    started = time.monotonic()
    r = subprocess.run([ARGS.crl, *extra, *args], capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    if expect is not None and r.returncode != expect:
        fail(f"crl {' '.join(args)}: exit {r.returncode}, expected {expect}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r, seconds


def eval_model(h5, *more, expect=0):
    return crl(["eval-model", "--model", MODEL, *TASKS, *SAMPLING, "--h5", h5, *more], expect=expect)


def read(h5):
    import h5py
    with h5py.File(h5, "r") as f:
        verdicts = list(zip(f["verdicts/task"].asstr()[:], f["verdicts/candidate"].asstr()[:], f["verdicts/status"].asstr()[:]))
        samples = list(zip(f["samples/sample_id"][:].tolist(), f["samples/task"].asstr()[:], f["samples/sample"][:].tolist()))
        texts = dict(zip(f["text/sample_completions/id"][:].tolist(), f["text/sample_completions/text"].asstr()[:]))
        meta = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["meta"].attrs.items()}
    completions = {(task, sample): texts[sid] for sid, task, sample in samples}
    return verdicts, samples, completions, meta


def check_first_run():
    h5 = os.path.join(ARGS.work, "eval.h5")
    r, seconds = eval_model(h5, "--samples", "3", "--json")
    print(f"crl eval-model, 2 tasks x 3 samples on the tiny model: {seconds:.1f} s")
    summary = json.loads(r.stdout)
    if summary["tasks"] != 2 or summary["samples"] != 6 or summary["samples_per_task"] != 3:
        fail(f"summary counts: {summary}")
    for t in summary["per_task"]:
        if t["samples"] != 3 or sum(t["statuses"].values()) != 3:
            fail(f"per task: {t}")
    if "sampled" not in r.stderr or "tokens/s" not in r.stderr or "ETA" not in r.stderr:
        fail(f"no progress line (step, rate, ETA) on stderr:\n{r.stderr}")
    verdicts, samples, completions, meta = read(h5)
    want = sorted((task, f"sample {s}") for task in TASKS for s in range(3))
    if sorted((t, c) for t, c, _ in verdicts) != want:
        fail(f"verdict rows {verdicts}, expected one per sample {want}")
    # The tiny random model writes no fenced program: each completion is its own format_error, judged
    # beside the others, never the end of the command.
    if any(status != "format_error" for _, _, status in verdicts):
        fail(f"statuses {verdicts}")
    if sorted((t, s) for _, t, s in samples) != sorted((t, s) for t in TASKS for s in range(3)):
        fail(f"/samples {samples}")
    if any(not text for text in completions.values()):
        fail("an empty completion text in /text/sample_completions")
    generation = json.loads(meta["generation"])
    if generation["model"] != os.path.abspath(MODEL) or generation["temperature"] != 1.0 or generation["prompt_format"] != "raw":
        fail(f"/meta generation {generation}")
    if meta.get("command") != "eval-model" or json.loads(meta["eval_model_tasks"]) != TASKS:
        fail(f"/meta {meta}")
    return h5


def check_report(h5):
    out = os.path.join(ARGS.work, "report")
    r, _ = crl(["report", h5, "--out", out, "--json"], expect=0)
    summary = json.loads(r.stdout)
    level = summary["inputs"][0]["levels"]["eager"]["level1"]
    if level["attempts"] != 6 or level["tasks"] != 2:
        fail(f"report's level1 row: {level}")
    if level["pass_at_k"]["1"] != 0.0 or level["pass_at_k_tasks"]["1"] != 2:
        fail(f"report's pass@k: {level['pass_at_k']} over {level['pass_at_k_tasks']}")
    if level["fast_p"]["1"] != 0.0 or not level["fast_p_denominator"].startswith("the level's 100"):
        fail(f"report's fast_p: {level['fast_p']} over {level['fast_p_denominator']} (KernelBench's: the level's tasks)")
    if "fast_p" not in summary["page"]["tables"]:
        fail(f"no fast_p table on the page: {summary['page']['tables']}")


def check_resume(h5):
    r, _ = eval_model(h5, "--samples", "3", expect=3)
    if "--resume" not in r.stderr:
        fail(f"an existing file without --resume: {r.stderr}")
    r, _ = eval_model(h5, "--samples", "3", "--resume")
    if "holds verdicts of 6 of the 6 samples" not in r.stderr or "sampled" in r.stderr:
        fail(f"--resume of a complete file sampled or judged again:\n{r.stderr}")
    before = read(h5)
    r, _ = eval_model(h5, "--samples", "4", "--resume")
    verdicts, samples, completions, _ = read(h5)
    if len(verdicts) != 8 or sorted(t for t, c, _ in verdicts if c == "sample 3") != TASKS:
        fail(f"--resume --samples 4 should add sample 3 of each task only: {verdicts}")
    if any(completions[k] != v for k, v in before[2].items()):
        fail("--resume changed the completions the file held")
    # A sample drawn on resume is the one a fresh run draws (keyed by its task and index, not by the run).
    fresh = os.path.join(ARGS.work, "fresh.h5")
    eval_model(fresh, "--samples", "4")
    fresh_completions = read(fresh)[2]
    if fresh_completions != completions:
        fail(f"a fresh run of 4 samples drew other completions than the run resumed to 4:\n{fresh_completions}\n{completions}")
    r, _ = crl(["eval-model", "--model", MODEL, *TASKS, *SAMPLING[:2], "--temperature", "0.5", *SAMPLING[4:], "--h5", h5,
                "--resume"], expect=3)
    if "temperature" not in r.stderr:
        fail(f"--resume with another temperature: {r.stderr}")
    eval_model(h5, "--samples", "2", "--append")
    indices = sorted(s for _, t, s in read(h5)[1] if t == TASKS[0])
    if indices != [0, 1, 2, 3, 4, 5]:
        fail(f"--append --samples 2 should add samples 4 and 5: {indices}")


def check_bad_input():
    h5 = os.path.join(ARGS.work, "bad.h5")
    cases = [(["level9/000_nothing"], "level9/000_nothing"), (["--level", "9"], "--level 9"), ([], "name a task")]
    for selection, named in cases:
        r, _ = crl(["eval-model", "--model", MODEL, *selection, *SAMPLING, "--h5", h5], expect=3)
        if named not in r.stderr:
            fail(f"{selection}: the message does not name {named!r}: {r.stderr}")
    r, _ = crl(["eval-model", "--model", os.path.join(ARGS.work, "no-model"), *TASKS, "--h5", h5], expect=3)
    if "no-model" not in r.stderr:
        fail(f"a missing model folder: {r.stderr}")
    if os.path.exists(h5):
        fail("bad input left a results file behind")


def main():
    global ARGS, MODEL
    prepared = job_test_setup.prepare(quiet=True)
    if prepared is None:
        return 0
    ARGS, MODEL = prepared
    h5 = check_first_run()
    check_report(h5)
    check_resume(h5)
    check_bad_input()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
