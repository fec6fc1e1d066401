#!/usr/bin/env python3
"""CUDA-L1's released table checked with crl's judge: its release file beside `crl data import --json` reports.

  crl data import h100.json --out kept.jsonl --backend cuda --scale full --json > import.json
  python3 tools/analysis/cuda_l1_table.py h100.json import.json [more reports of the same file's parts] [--json]

The release (deepreinforce-ai/CUDA-L1, optimized_cuda_code/<gpu>.json: JSON lines of {level_id, task_id,
custom_code, score_default, ...}) is not part of crl: keep it in an ignored folder. Prints (Markdown, or
--json): the rows judged, ok and rejected by status; format_error by reason; for the ok rows crl's
speedup beside the release's score_default per level (mean, median, and the median of crl/CUDA-L1);
the rows whose code lowers precision (TF32, half, bfloat16, autocast) with crl's verdict of each; and
every rejection in one line, crl's own message. A row the reports lack is listed as not judged.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys

_PROBLEM = re.compile(r"level(\d+)/(\d{3})_")
# Code that asks for less than float32's precision on an fp32 task (CUDA-L1's README counts ~34 rows).
_LOW_PRECISION = {
    "tf32": re.compile(r"allow_tf32\s*=\s*True|set_float32_matmul_precision\(\s*['\"](high|medium)"),
    "half": re.compile(r"\.half\(\)|torch\.(float16|half)\b|__half|\bhalf2\b"),
    "bfloat16": re.compile(r"bfloat16|__nv_bfloat16"),
    "autocast": re.compile(r"autocast"),
}
# format_error messages grouped by what crl could not do (docs/evaluation.md, "KernelBench-format candidates").
_FORMAT_REASONS = [
    ("tensors differ in count from the module's", re.compile(r"ModelNew has \d+ (parameter|buffer)")),
    ("a tensor's shape differs from the module's", re.compile(r"has shape \[")),
    ("a tensor's dtype differs", re.compile(r"\) is (float|int|bfloat|bool)")),
    ("load (source files) or torch.compile", re.compile(r"crl builds load_inline's sources only|torch\.compile")),
    ("no ModelNew", re.compile(r"defines no ModelNew|not a class|does not derive")),
]


def read_release(path: str) -> dict:
    """{(level, problem): row} of the release's JSON lines."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows[(int(row["level_id"]), int(row["task_id"]))] = row
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{number}: not a CUDA-L1 release row ({e})")
    return rows


def read_verdicts(paths: list[str]) -> dict:
    """{(level, problem): report line} of `crl data import --json` reports."""
    verdicts = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            try:
                report = json.load(f)
            except ValueError as e:
                sys.exit(f"{path}: not a `crl data import --json` report ({e})")
        for line in report.get("lines", []):
            match = _PROBLEM.match(str(line.get("task", "")))
            if match:
                verdicts[(int(match.group(1)), int(match.group(2)))] = line
    return verdicts


def has_code(row: dict) -> bool:
    code = row.get("custom_code")
    return isinstance(code, str) and code.strip() not in ("", "None")


def format_reason(message: str) -> str:
    return next((reason for reason, pattern in _FORMAT_REASONS if pattern.search(message)), "other")


def summary(release: dict, verdicts: dict) -> dict:
    judged, not_judged, statuses, formats = [], [], {}, {}
    for key, row in sorted(release.items()):
        if not has_code(row):
            continue
        v = verdicts.get(key)
        if v is None:
            not_judged.append(key)
            continue
        judged.append((key, row, v))
        statuses[v["status"]] = statuses.get(v["status"], 0) + 1
        if v["status"] == "format_error":
            reason = format_reason(v.get("message", ""))
            formats[reason] = formats.get(reason, 0) + 1
    levels = {}
    for (level, _), row, v in judged:
        if v["status"] != "ok":
            continue
        entry = levels.setdefault(f"level{level}", {"crl": [], "cuda_l1": [], "ratio": []})
        entry["crl"].append(v["speedup"])
        score = row.get("score_default")
        if isinstance(score, (int, float)) and score > 0:
            entry["cuda_l1"].append(float(score))
            entry["ratio"].append(v["speedup"] / float(score))
    per_level = {
        level: {"ok": len(e["crl"]), "crl_mean": statistics.fmean(e["crl"]), "crl_median": statistics.median(e["crl"]),
                "cuda_l1_mean": statistics.fmean(e["cuda_l1"]) if e["cuda_l1"] else None,
                "cuda_l1_median": statistics.median(e["cuda_l1"]) if e["cuda_l1"] else None,
                "median_ratio": statistics.median(e["ratio"]) if e["ratio"] else None}
        for level, e in sorted(levels.items())
    }
    low_precision = []
    for (level, problem), row, v in judged:
        kinds = [kind for kind, pattern in _LOW_PRECISION.items() if pattern.search(row["custom_code"])]
        if kinds:
            low_precision.append({"task": v["task"], "kinds": kinds, "status": v["status"], "speedup": v["speedup"],
                                  "score_default": row.get("score_default")})
    rejections = [{"task": v["task"], "status": v["status"], "message": v.get("message", "").splitlines()[0][:200]
                   if v.get("message") else ""} for _, _, v in judged if v["status"] != "ok"]
    return {"rows": len(release), "with_code": sum(1 for r in release.values() if has_code(r)), "judged": len(judged),
            "not_judged": [f"level{level}/{problem:03d}" for level, problem in not_judged], "statuses": statuses,
            "format_error_reasons": formats, "per_level": per_level, "low_precision": low_precision, "rejections": rejections}


def number(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(s: dict) -> str:
    out = [f"{s['judged']} of the release's {s['with_code']} rows with code judged ({s['rows']} rows; "
           f"{len(s['not_judged'])} with code not in the reports).", "", "| status | rows |", "| --- | --- |"]
    out += [f"| {status} | {n} |" for status, n in sorted(s["statuses"].items())]
    if s["format_error_reasons"]:
        out += ["", "| format_error: why | rows |", "| --- | --- |"]
        out += [f"| {reason} | {n} |" for reason, n in sorted(s["format_error_reasons"].items())]
    out += ["", "| level | ok | crl mean | crl median | CUDA-L1 mean | CUDA-L1 median | median crl/CUDA-L1 |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    out += [f"| {level} | {e['ok']} | {number(e['crl_mean'])} | {number(e['crl_median'])} | {number(e['cuda_l1_mean'])} | "
            f"{number(e['cuda_l1_median'])} | {number(e['median_ratio'])} |" for level, e in s["per_level"].items()]
    if s["low_precision"]:
        out += ["", "| lowers precision | how | crl | speedup | CUDA-L1 |", "| --- | --- | --- | --- | --- |"]
        out += [f"| {r['task']} | {', '.join(r['kinds'])} | {r['status']} | {number(r['speedup'])} | {number(r['score_default'])} |"
                for r in s["low_precision"]]
    if s["rejections"]:
        out += ["", "Rejections, each in crl's words:", ""]
        out += [f"- {r['task']}: {r['status']}: {r['message']}" for r in s["rejections"]]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", help="CUDA-L1's optimized_cuda_code/<gpu>.json")
    parser.add_argument("reports", nargs="+", help="`crl data import --json` reports of it (or of its parts)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    s = summary(read_release(args.release), read_verdicts(args.reports))
    print(json.dumps(s, indent=2) if args.json else markdown(s), end="" if not args.json else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
