#!/usr/bin/env python3
"""KernelBench's own modules as KernelBench-format candidates for crl's suite tasks: each task's
`Model` renamed `ModelNew`, one JSONL line per task ({task, program, format: kernelbench, id}).

Judged by `crl eval`, they check that every task's spec (init_args, kernelbench_params) builds and
feeds KernelBench's own module, and, timed, what a Python module calling the reference's own ATen
ops pays against crl's C++ reference: the Python overhead a KernelBench-format candidate carries
(docs/evaluation.md, "KernelBench-format candidates").

KernelBench is not part of crl: point --kernelbench at a checkout (kept in an ignored folder).
  python3 tools/bench/kernelbench_candidates.py --kernelbench .carry/KernelBench --level 1 > kb1.jsonl
  build/apps/crl/crl eval kb1.jsonl --no-timing --json
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_suite import SpecError, kernelbench_file  # noqa: E402  (the same task -> KernelBench file rule)


def suite_tasks(suite, levels):
    tasks = []
    for level in levels:
        for path in sorted(glob.glob(os.path.join(suite, f"level{level}", "*.crl"))):
            tasks.append(f"level{level}/{os.path.basename(path)[:-4]}")
    return tasks


def as_candidate(text):
    """The module with its class Model named ModelNew (every use of the name: super(Model, self), ...)."""
    return re.sub(r"\bModel\b", "ModelNew", text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", required=True, help="a KernelBench checkout (root or its KernelBench/ folder)")
    parser.add_argument("--suite", default=os.path.join(os.path.dirname(__file__), "..", "..", "jobs", "suite"))
    parser.add_argument("--level", type=int, action="append", help="levels to write (default: 1, 2 and 3)")
    parser.add_argument("--task", action="append", help="only these tasks (ids or id prefixes)")
    args = parser.parse_args()
    missing = 0
    for task in suite_tasks(args.suite, args.level or [1, 2, 3]):
        if args.task and not any(task.startswith(t) for t in args.task):
            continue
        try:
            path = kernelbench_file(args.kernelbench, task)
        except SpecError:
            path = None
        if path is None:
            print(f"kernelbench_candidates: no KernelBench file for {task} under {args.kernelbench}", file=sys.stderr)
            missing += 1
            continue
        with open(path, encoding="utf-8") as f:
            program = as_candidate(f.read())
        print(json.dumps({"task": task, "program": program, "format": "kernelbench", "id": "kernelbench:" + os.path.basename(path)}))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
