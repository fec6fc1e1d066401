#!/usr/bin/env python3
"""Replays the same candidates under the same secret with two crl builds and compares the verdicts.

What must agree between two builds whose evaluation is meant to behave alike (a refactoring): each
verdict's status (hack kind included), trials run and passed, the named checks in order with
whether each passed, and every check's detail that does not come from a clock (the judge step names
the secret and the timed batch's slots; a failed trial names its seed; guard details name what they
saw). Timing figures (speedups, intervals, seconds, pair costs) are left out: they are measurements.

    tools/compare_verdicts.py --before OLD/crl --after NEW/crl --suite tests/data/eval/suite \\
        --seed 7 [--candidates manifest.jsonl] [--json]

Without --candidates it judges every CPU fixture of tests/data/eval (relu, hacks, attacks) against
its task. Exit 0 when every verdict agrees, 1 when any differs (each difference printed).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Details of these checks hold clock readings; only whether they passed is compared.
TIMED_STEPS = {"timing", "compile", "load", "guard: timed outputs", "guard: roofline", "guards"}
# Checks that run only for some measured speedups (a re-measure above --remeasure-above): left out.
TIMING_DEPENDENT_STEPS = {"guard: re-measure"}
# Numbers that are measurements wherever they appear (durations, rates), and what a mismatch says of
# values the program left in memory it never wrote (stale-memory fixtures read whatever was there):
# how many elements differ, where the worst one is and what it held.
MEASURED = re.compile(r"\d+ of \d+ elements|flat index \d+|got [^,]+|\d+(\.\d+)?\s*(s|ms|us|x|%)\b|\d+\.\d+")


def fixture_manifest():
    """Every CPU fixture with the task its test judges it against."""
    rows = []
    for folder in ("relu", "hacks", "attacks"):
        base = os.path.join(ROOT, "tests", "data", "eval", folder)
        for name in sorted(os.listdir(base)):
            if not name.endswith(".crl") or ".cuda." in name:
                continue
            task = "level2/001_row_mean" if "batch_copy" in name else "level1/019_relu"
            if name.startswith("dropped_clamp"):
                continue  # judged against the real suite's level2/022 in its test
            with open(os.path.join(base, name)) as f:
                rows.append({"task": task, "program": f.read(), "id": f"{folder}/{name}"})
    return rows


def judge(crl, suite, row, seed, extra):
    """One candidate in its own `crl eval`: a task's judge draws on from one candidate to the next
    (how many pairs a timing took moves the next one's draws), so only a fresh judge replays."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "candidate.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(row) + "\n")
        cmd = [crl, "eval", path, "--suite", suite, "--seed", str(seed), "--json", "--cpu-threads", "1", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout)[0]


def comparable(v):
    steps = []
    for s in v["steps"]:
        if s["name"] in TIMING_DEPENDENT_STEPS:
            continue
        detail = "" if s["name"] in TIMED_STEPS else MEASURED.sub("#", s["detail"])
        steps.append((s["name"], s["passed"], detail))
    message = MEASURED.sub("#", v["message"]) if v["status"] != "ok" else ""
    return {"status": v["status"], "trials_run": v["trials_run"], "trials_passed": v["trials_passed"],
            "steps": steps, "message": message}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--suite", default=os.path.join(ROOT, "tests", "data", "eval", "suite"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--candidates", help="JSONL of {task, program, id}")
    p.add_argument("--json", action="store_true")
    p.add_argument("--time-budget", default="0.5")
    p.add_argument("--only", nargs="*", help="judge only the candidates whose id contains one of these")
    args = p.parse_args()
    manifest = fixture_manifest()
    if args.candidates:
        with open(args.candidates) as f:
            manifest = [json.loads(line) for line in f if line.strip()]
    if args.only:
        manifest = [row for row in manifest if any(o in row["id"] for o in args.only)]
    extra = ["--time-budget", args.time_budget]
    before, after = {}, {}
    for i, row in enumerate(manifest):
        print(f"[{i + 1}/{len(manifest)}] {row['id']}", file=sys.stderr, flush=True)
        before[row["id"]] = judge(args.before, args.suite, row, args.seed, extra)
        after[row["id"]] = judge(args.after, args.suite, row, args.seed, extra)
    differences = []
    for row in manifest:
        name = row["id"]
        a, b = comparable(before[name]), comparable(after[name])
        if a != b:
            differences.append({"candidate": name, "before": a, "after": b})
    report = {"candidates": len(manifest), "seed": args.seed, "differ": len(differences), "differences": differences,
              "statuses": {row["id"]: after[row["id"]]["status"] for row in manifest}}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for row in manifest:
            same = all(d["candidate"] != row["id"] for d in differences)
            print(f"{'same' if same else 'DIFFERS':8} {after[row['id']]['status']:28} {row['id']}")
        for d in differences:
            print(f"\n{d['candidate']}:")
            for key in d["before"]:
                if d["before"][key] != d["after"][key]:
                    print(f"  {key}:\n    before {d['before'][key]}\n    after  {d['after'][key]}")
        print(f"\n{len(manifest) - len(differences)} of {len(manifest)} verdicts agree (seed {args.seed})")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
