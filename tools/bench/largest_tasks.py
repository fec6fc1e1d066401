#!/usr/bin/env python3
"""The suite's N tasks of most memory traffic at a scale (the spec's `bytes`, e.g. 019_relu's
12.9 GB at full), as the JSONL `crl eval` reads: each task's reference program as its candidate.

Usage: crl tasks list --json | tools/bench/largest_tasks.py [--count 10] [--scale full] [--copies N] > tasks.jsonl
Used to time one correctness trial of the largest tasks (tools/gpu-measure.sh, step trial_time) and,
with --copies 16, for groups of correct candidates that must all fit the card beside the judge and the
reference's worker (step memory_groups): each copy a distinct text (a comment), compiled and judged
on its own."""
import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--scale", default="full")
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args()
    tasks = json.load(sys.stdin)
    sized = [t for t in tasks if args.scale in t.get("scales", {})]
    sized.sort(key=lambda t: t["scales"][args.scale]["bytes"], reverse=True)
    for t in sized[: args.count]:
        with open(t["path"], encoding="utf-8") as f:
            program = f.read()
        program = without_spec(program)
        if args.copies == 1:
            print(json.dumps({"task": t["id"], "id": t["id"] + ":reference", "program": program}))
            continue
        for copy in range(1, args.copies + 1):
            print(json.dumps({"task": t["id"], "id": f"{t['id']}:reference:{copy}", "program": f"// copy {copy}\n{program}"}))
    return 0


def without_spec(program: str) -> str:
    """The program without its `// crl:spec` section (a candidate may not carry one)."""
    kept, in_spec = [], False
    for line in program.splitlines(keepends=True):
        marker = line.strip()
        if marker == "// crl:spec":
            in_spec = True
            continue
        if marker in ("// crl:host", "// crl:device"):
            in_spec = False
        if not in_spec:
            kept.append(line)
    return "".join(kept)


if __name__ == "__main__":
    sys.exit(main())
