#!/usr/bin/env python3
"""Compares two crl results files (HDF5, docs/results-format.md) column by column: every group's
attributes, every dataset (a table's column, a text store's ids and texts) and every /meta
attribute, and prints what differs. Columns that hold times, or that depend on which evaluator
was idle first, differ between any two runs and are left out (listed below; --ignore adds more,
--keep-times compares them too). Exit status 0 when everything compared is equal, 1 otherwise.

  tools/compare_results.py A/results.h5 B/results.h5 [--ignore steps/loss --ignore /meta@hosts]

Column names: "<group>/<dataset>" ("rollouts/speedup", "text/logs/text"); attributes:
"<group>@<name>" ("/meta@git_commit", "steps@crl_columns").
Needs h5py and numpy (the analysis venv: ~/.local/share/crl/venv/bin/python3).
"""
import argparse
import sys

import h5py
import numpy as np

# Wall times of a step's parts, and what is computed from them alone.
TIME_COLUMNS = [
    "steps/seconds_generate", "steps/seconds_evaluate", "steps/seconds_train", "steps/seconds_step",
    "steps/trainer_wait_seconds", "steps/evaluator_busy_fraction",
]
# Which evaluator took a program (whichever was idle first), the logs that hold each verdict's own
# timings and its judged task's fresh secret (drawn per run, never from the job's seed), and the
# commit of the build that wrote the file.
SCHEDULE_COLUMNS = ["rollouts/evaluator_rank", "text/logs/text", "/meta@git_commit"]


def collect(path):
    """{name: value} of every dataset ("group/dataset") and attribute ("group@name") of a file."""
    out = {}
    with h5py.File(path, "r") as f:
        def attributes(name, obj):
            for key, value in obj.attrs.items():
                out[f"{'/' + name if name in ('meta', '') else name}@{key}"] = value
        attributes("", f)
        def visit(name, obj):
            attributes(name, obj)
            if isinstance(obj, h5py.Dataset):
                values = obj[()]
                if values.dtype.kind == "O":  # variable-length strings
                    values = obj.asstr()[()]
                out[name] = np.asarray(values)
        f.visititems(visit)
    return out


def as_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def shown(x, y):
    """x and y as short reprs; two texts from where they first differ."""
    x, y = as_text(x), as_text(y)
    if isinstance(x, str) and isinstance(y, str) and len(x) + len(y) > 120:
        at = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        return f"from character {at}: {x[at:at + 50]!r} vs {y[at:at + 50]!r}"
    return f"{repr(x)[:80]} vs {repr(y)[:80]}"


def differences(a, b):
    """A list of lines describing how `a` and `b` differ (empty when equal)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return [f"shape {a.shape} vs {b.shape}"]
        if a.dtype.kind == "f" and b.dtype.kind == "f":
            same = (a == b) | (np.isnan(a) & np.isnan(b))
        else:
            same = np.array([as_text(x) == as_text(y) for x, y in zip(a.ravel(), b.ravel())], dtype=bool).reshape(a.shape)
        if same.all():
            return []
        where = np.argwhere(~same)
        lines = [f"{len(where)} of {a.size} values differ"]
        for index in where[:3]:
            i = tuple(index)
            lines.append(f"  at {[int(k) for k in i]}: {shown(a[i], b[i])}")
        return lines
    return [] if as_text(a) == as_text(b) else [shown(a, b)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ignore", action="append", default=[], help="a column or attribute to leave out (repeatable)")
    ap.add_argument("--keep-times", action="store_true", help="compare the time and schedule columns too")
    args = ap.parse_args()
    ignored = set(args.ignore) | (set() if args.keep_times else set(TIME_COLUMNS + SCHEDULE_COLUMNS))
    a, b = collect(args.a), collect(args.b)
    names = sorted(set(a) | set(b))
    compared, differing = 0, []
    for name in names:
        if name in ignored:
            continue
        if name not in a or name not in b:
            differing.append((name, [f"only in {'A' if name in a else 'B'}"]))
            continue
        compared += 1
        lines = differences(a[name], b[name])
        if lines:
            differing.append((name, lines))
    print(f"A: {args.a}\nB: {args.b}")
    print(f"left out ({len(ignored & set(names))}): {', '.join(sorted(ignored & set(names)))}")
    print(f"compared {compared} columns and attributes: {compared - len([d for d in differing if d[0] in a and d[0] in b])} equal, "
          f"{len(differing)} differ")
    for name, lines in differing:
        print(f"DIFFERS {name}: {lines[0]}")
        for line in lines[1:]:
            print(f"        {line}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
