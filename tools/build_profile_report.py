#!/usr/bin/env python3
"""The table of a profiled build (tools/build_profile.sh): CPU seconds per target group and the costliest steps."""
import argparse
import collections
import json
import sys

GROUPS = ("lib", "apps", "tests", "bench", "pch", "other")


def group_of(output: str) -> str:
    # A step's output is a path inside the build folder: lib/eval/CMakeFiles/crl_eval.dir/x.cpp.o,
    # tests/eval/eval_pipeline_test, .../cmake_pch.hxx.gch.
    if "cmake_pch" in output:
        return "pch"
    top = output.split("/", 1)[0]
    return top if top in GROUPS else "other"


def read_steps(path):
    steps = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                sys.exit(f"build_profile_report: {path}:{n}: not 'cpu<TAB>wall<TAB>output': {line!r}")
            cpu, wall, output = float(parts[0]), float(parts[1]), parts[2]
            steps.append({"output": output, "cpu_s": cpu, "wall_s": wall,
                          "kind": "compile" if output.endswith((".o", ".gch", ".pch")) else "link"})
    return steps


def summarize(steps):
    table = collections.OrderedDict((g, {"compiles": 0, "links": 0, "compile_cpu_s": 0.0, "link_cpu_s": 0.0}) for g in GROUPS)
    for s in steps:
        row = table[group_of(s["output"])]
        row["compiles" if s["kind"] == "compile" else "links"] += 1
        row["compile_cpu_s" if s["kind"] == "compile" else "link_cpu_s"] += s["cpu_s"]
    for row in table.values():
        row["cpu_s"] = row["compile_cpu_s"] + row["link_cpu_s"]
    return table


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("profile")
    p.add_argument("--wall", type=float, required=True)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--targets", default="all")
    p.add_argument("--compiler", default="")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    steps = read_steps(a.profile)
    table = summarize(steps)
    total = sum(r["cpu_s"] for r in table.values())
    costliest = sorted(steps, key=lambda s: -s["cpu_s"])[: a.top]
    if a.json:
        json.dump({"targets": a.targets, "compiler": a.compiler, "jobs": a.jobs, "wall_s": a.wall, "cpu_s": total, "steps": len(steps),
                   "groups": table, "costliest": costliest}, sys.stdout, indent=1)
        print()
        return
    print(f"build of {a.targets} by {a.compiler or 'the default compiler'} with {a.jobs} jobs: {a.wall:.0f} s wall, "
          f"{total:.0f} CPU s in {len(steps)} steps")
    print(f"{'group':<7}{'compiles':>9}{'CPU s':>9}{'links':>7}{'CPU s':>8}{'total':>9}")
    for g, r in table.items():
        if r["compiles"] or r["links"]:
            print(f"{g:<7}{r['compiles']:>9}{r['compile_cpu_s']:>9.0f}{r['links']:>7}{r['link_cpu_s']:>8.0f}{r['cpu_s']:>9.0f}")
    print("costliest steps (CPU s):")
    for s in costliest:
        print(f"  {s['cpu_s']:7.1f}  {s['output']}")


if __name__ == "__main__":
    main()
