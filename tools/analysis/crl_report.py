#!/usr/bin/env python3
"""crl report: the literature's tables and plots from crl results files, as a page people read.

    crl report A.h5 [B.h5 ...] --out DIR [--json]          (the crl command runs this script)
    python3 tools/analysis/crl_report.py A.h5 --out DIR [--tasks-json T.json --suite-dir jobs/suite]

Inputs: crl results files (`crl eval --h5`, `crl run`), `crl tasks check --out` JSON (reference
times), and the examples' speedup JSON (results/baselines). Writes DIR/index.html (one page, plots
embedded as PNG, no network), DIR/summary.md (+ DIR/plots/*.png), DIR/tasks.csv (one row per input
and task), DIR/summary.json (every number; --json prints it too). docs/report.md explains each table.
Exit codes: 0 written, 2 bad arguments, 3 an input that cannot be read (the message names it), 4 a
failure of the report itself.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import difflib
import html
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import crl_results  # noqa: E402
crl_plots = None  # imported by build()
import crl_sources  # noqa: E402
import crl_stats  # noqa: E402

REPORT_VERSION = 1
MAX_DIFF_LINES = 400
EXIT_INPUT, EXIT_INTERNAL = 3, 4


class Page:
    """Collects the report's sections once and writes them as HTML and Markdown."""

    def __init__(self, title: str, plots_dir: str):
        self.title = title
        self.html: list[str] = []
        self.md: list[str] = [f"# {title}", ""]
        self.tables: list[str] = []
        self.plots: list[str] = []
        self.plots_dir = plots_dir

    def heading(self, text: str, note: str = ""):
        self.html.append(f"<h2>{html.escape(text)}</h2>")
        self.md += [f"## {text}", ""]
        if note:
            self.html.append(f"<p class='note'>{html.escape(note)}</p>")
            self.md += [note, ""]

    def table(self, name: str, frame: pd.DataFrame, caption: str = "", collapsed: bool = False, md: bool = True):
        if frame is None or frame.empty:
            return
        self.tables.append(name)
        shown = _formatted(frame)
        body = shown.to_html(index=False, escape=True, border=0, classes="crl-table", na_rep="-")
        body = body.replace("<table ", f"<table data-name='{html.escape(name)}' ", 1)
        cap = f"<p class='caption'>{html.escape(caption)}</p>" if caption else ""
        if collapsed:
            self.html.append(f"<details><summary>{html.escape(caption or name)} ({len(frame)} rows)</summary>"
                             f"{body}</details>")
        else:
            self.html.append(cap + body)
        if md:
            self.md += ([f"*{caption}*", ""] if caption else []) + [_markdown_table(shown), ""]

    def plot(self, name: str, png: bytes | None, caption: str):
        if png is None:
            return
        self.plots.append(name)
        with open(os.path.join(self.plots_dir, f"{name}.png"), "wb") as f:
            f.write(png)
        data = base64.b64encode(png).decode("ascii")
        self.html.append(f"<figure><img class='crl-plot' data-name='{html.escape(name)}' alt='{html.escape(caption)}' "
                         f"src='data:image/png;base64,{data}'><figcaption>{html.escape(caption)}</figcaption></figure>")
        self.md += [f"![{caption}](plots/{name}.png)", ""]

    def raw(self, html_text: str):
        self.html.append(html_text)

    def write_html(self, path: str, generated: str):
        style = ("body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}"
                 "table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{padding:2px 6px;"
                 "border-bottom:1px solid #ddd;text-align:right}th{background:#f3f3f3}td:first-child,"
                 "th:first-child{text-align:left}pre{font-size:11px;background:#f8f8f8;padding:.5em;"
                 "overflow-x:auto}.note,.caption{color:#555;font-size:13px}figure{margin:.5em 1em .5em 0;display:inline-block;vertical-align:top}figcaption{font-size:12px;color:#555;max-width:440px}"
                 "details{margin:.3em 0}.add{color:#070}.del{color:#a00}")
        doc = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
               "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; "
               "style-src 'unsafe-inline'\">",
               f"<title>{html.escape(self.title)}</title><style>{style}</style></head><body>",
               f"<h1>{html.escape(self.title)}</h1><p class='note'>{html.escape(generated)}</p>",
               *self.html, "</body></html>"]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(doc))

    def write_md(self, path: str, generated: str, plots_prefix: str = "plots/"):
        lines = [line.replace("](plots/", f"]({plots_prefix}") if line.startswith("![") else line for line in self.md]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join([lines[0], "", generated, "", *lines[1:]]).rstrip() + "\n")


def _formatted(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in out.columns:
        if pd.api.types.is_float_dtype(out[column]):
            out[column] = out[column].map(_number_text)
    return out


def _number_text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _markdown_table(frame: pd.DataFrame) -> str:
    def cell(v):
        return str("-" if v is None or (isinstance(v, float) and math.isnan(v)) else v).replace("|", "\\|").replace(
            "\n", " ")
    lines = ["| " + " | ".join(map(cell, frame.columns)) + " |", "|" + " --- |" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _json_safe(value):
    """Plain JSON: numpy scalars to Python, non-finite floats to null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    return value


def _load_tasks_meta(path: str) -> dict:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise crl_sources.InputProblem(f"{path}: cannot read the task metadata ({e!r})") from None
    if not isinstance(doc, list) or not all(isinstance(t, dict) and isinstance(t.get("id"), str) for t in doc):
        raise crl_sources.InputProblem(f"{path}: task metadata must be `crl tasks list --json`'s array")
    return {t["id"]: t for t in doc}


def _reference_text(task: str, tasks_meta: dict, suite_dir: str) -> str | None:
    path = tasks_meta.get(task, {}).get("path") or (os.path.join(suite_dir, task + ".crl") if suite_dir else "")
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    return None


def _diff_html(reference: str | None, program: str | None, name: str) -> str:
    if program is None:
        return "program text not in the file"
    if reference is None:
        return f"<details><summary>program</summary><pre>{html.escape(program)}</pre></details>"
    lines = list(difflib.unified_diff(reference.splitlines(), program.splitlines(), "reference", name, lineterm="", n=2))
    cut = len(lines) > MAX_DIFF_LINES
    lines = lines[:MAX_DIFF_LINES]
    body = "\n".join(f"<span class='{'add' if l.startswith('+') else 'del' if l.startswith('-') else ''}'>"
                     f"{html.escape(l)}</span>" for l in lines)
    changed = sum(1 for l in lines if l[:1] in "+-" and not l.startswith(("+++", "---")))
    return (f"<details><summary>{changed} lines differ{' (diff cut)' if cut else ''}</summary>"
            f"<pre class='diff'>{body}</pre></details>")


def _levels_frame(levels_by_source: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """levels_by_source: {input: {split: {group_key(baseline, format): {level: summary}}}}; a split column
    where any input has one (a run's trained-on and held-out tasks, counted apart), a format column where
    any input holds KernelBench-format programs."""
    cuda_l1, fast_p, rates = [], [], []
    with_split = any(split for by_split in levels_by_source.values() for split in by_split)
    rows = [(label, split, group, level, s) for label, by_split in levels_by_source.items()
            for split, by_group in by_split.items() for group, levels in by_group.items()
            for level, s in levels.items()]
    # A format column where any input holds programs other than .crl ones (KernelBench's ModelNew).
    with_format = any(crl_stats.split_group_key(group)[1] != "crl" for _, _, group, _, _ in rows)
    for label, split, group, level, s in rows:
        baseline, program_format = crl_stats.split_group_key(group)
        key = {"input": label, **({"split": split or "-"} if with_split else {}), "baseline": baseline,
               **({"format": program_format} if with_format else {}), "level": level}
        cuda_l1.append({**key, "tasks": s["tasks"], "correct": s["tasks_correct"],
                        "speedup>1.01": s["tasks_faster"], "mean": s["mean"], "max": s["max"],
                        "75%": s["q75"], "50%": s["median"], "25%": s["q25"]})
        fast_p.append({**key, **{f"fast_{p}": v for p, v in s["fast_p"].items()}, "over": s["fast_p_denominator"],
                       "geomean": s["geomean"], **{f"pass@{k}": v for k, v in s["pass_at_k"].items()}})
        rates.append({**key, "attempts": s["attempts"], "compile rate": s["compile_rate"],
                      "correct rate": s["correct_rate"], "hack rate": s["hack_rate"],
                      "statuses": ", ".join(f"{k} {v}" for k, v in s["status_counts"].items())})
    return pd.DataFrame(cuda_l1), pd.DataFrame(fast_p), pd.DataFrame(rates)


def _hack_rows(source: crl_sources.Source) -> list[dict]:
    rows = []
    a = source.attempts
    for _, r in a[a["status_kind"] == "hack"].iterrows():
        guard, saw = r["hack_kind"], r["message"]
        checks = source.verdict_steps.get(int(r["program_id"]), []) if math.isnan(r["step"]) else []
        failed = [c for c in checks if not c.get("passed", True)]
        if failed:
            guard, saw = str(failed[-1].get("name", guard)), str(failed[-1].get("detail", saw))
        elif not math.isnan(r["step"]):
            saw = source.logs.get(int(r["program_id"]), "")[:300]
        rows.append({"input": source.label, **_split_cell(source, r), "task": r["task"], "program": r["candidate"],
                     "step": r["step"], "status": r["status"], "guard": guard, "what it saw": saw})
    verdict_ids = set(a[a["status_kind"] != "hack"]["program_id"]) if len(a) else set()
    for row, checks in source.verdict_steps.items():
        if row not in verdict_ids:
            continue
        for c in checks:
            if "re-measure" in str(c.get("name", "")):
                r = a[(a["program_id"] == row) & a["step"].isna()].iloc[0]
                rows.append({"input": source.label, **_split_cell(source, r), "task": r["task"], "program": r["candidate"],
                             "step": np.nan, "status": r["status"], "guard": str(c.get("name")),
                             "what it saw": str(c.get("detail", ""))})
    return rows


def _has_held_out(source: crl_sources.Source) -> bool:
    return bool(len(source.attempts)) and (source.attempts["split"] == crl_sources.HELD_OUT).any()


def _split_cell(source: crl_sources.Source, row) -> dict:
    """{"split": ...} for a row of a source with held-out tasks (so tables keep them apart), else {}."""
    return {"split": row["split"] or "-"} if _has_held_out(source) else {}


def _run_sections(page: Page, source: crl_sources.Source, best: pd.DataFrame):
    steps = source.steps
    label = source.label
    safe = "".join(ch if ch.isalnum() else "_" for ch in label)
    page.heading(f"Run {label}: per step", f"{len(steps)} steps flushed; stages: "
                 f"{', '.join(map(str, steps['stage'].unique())) if 'stage' in steps else '-'}")
    page.plot(f"{safe}_reward", crl_plots.step_lines(crl_stats.rewarded_steps(steps), "step",
                                                      {"reward_mean": "mean", "reward_median": "median", "reward_max": "max"},
                                                      "Reward per step", "reward"),
              "Reward mean / median / max per step (steps of stages with rollouts; sft steps have no reward)")
    page.plot(f"{safe}_loss", crl_plots.step_lines(steps, "step", {"loss": "loss", "grad_norm": "grad norm (before clipping)"},
                                                    "Loss and gradient norm per step", "loss / norm"),
              "Loss and gradient norm of each step's update")
    page.plot(f"{safe}_lr", crl_plots.step_lines(steps, "step", {"lr": "learning rate"}, "Learning rate per step", "lr"),
              "Learning rate of each step's update")
    page.plot(f"{safe}_policy", crl_plots.step_lines(steps, "step", {"entropy": "entropy (nats)", "kl": "KL to reference",
                                                                       "clip_fraction": "clip fraction"},
                                                      "Policy per step", "nats / share"),
              "Mean token entropy, KL to the reference policy (crl stages with grpo.kl > 0) and clipped share of tokens")
    page.plot(f"{safe}_advantages", crl_plots.step_lines(steps, "step", {"zero_advantage_fraction": "zero-advantage groups",
                                                                           "advantage_std": "advantage std"},
                                                          "Advantages per step", "share / std"),
              "Share of groups whose rewards were all equal (they teach nothing) and the advantages' spread")
    page.plot(f"{safe}_lengths", crl_plots.step_lines(steps, "step", {"completion_tokens_mean": "mean",
                                                                        "completion_tokens_max": "max"},
                                                       "Completion length per step", "tokens"),
              "Completion length in tokens per step")
    shares = crl_stats.step_status_shares(steps)
    page.plot(f"{safe}_status", crl_plots.step_lines(shares, "step", {c: c for c in shares.columns if c != "step"},
                                                      "Status shares per step", "share of rollouts", stacked=True),
              "Share of each status per step (hacking ratio: hack)")
    kinds = crl_stats.hack_kinds_per_step(source.rollouts)
    if not kinds.empty:
        page.plot(f"{safe}_hack_kinds", crl_plots.step_lines(kinds, "step", {c: c for c in kinds.columns if c != "step"},
                                                              "Hacks per step, by kind", "share of rollouts"),
                  "Hacking ratio per step by hack kind")
    page.plot(f"{safe}_tokens", crl_plots.step_lines(steps, "step", {"tokens_generated": "generated",
                                                                       "tokens_trained": "trained"},
                                                      "Tokens per step", "tokens"), "Tokens generated and trained per step")
    page.plot(f"{safe}_time", crl_plots.step_lines(steps, "step", {"seconds_generate": "generate",
                                                                     "seconds_evaluate": "evaluate",
                                                                     "seconds_train": "train"},
                                                    "Time per step", "seconds", stacked=True),
              "Time split per step: generate, evaluate, train")
    page.plot(f"{safe}_evaluators", crl_plots.step_lines(steps, "step", {"evaluator_busy_fraction": "evaluator busy",
                                                                           "trainer_wait_seconds": "trainer wait (s)"},
                                                          "Evaluators", "fraction / seconds"),
              "Evaluator busy fraction and trainer wait per step")
    trained = source.attempts[source.attempts["split"] != crl_sources.HELD_OUT]
    over = crl_stats.best_over_steps(trained)
    if not over.empty:
        page.plot(f"{safe}_best_over_steps", crl_plots.step_lines(over, "step", {"geomean_best": "geomean of best so far",
                                                                                   "max_best": "max"},
                                                                   "Best speedup so far", "speedup"),
                  "Best speedup per task over steps (geomean over tasks with a correct program so far)")
        page.table(f"{safe}_best_over_steps", over, "Tasks with a correct program and their best speedup so far, by step",
                   collapsed=True)
    lineage = crl_stats.exemplar_lineage(best, source.rollouts)
    page.table(f"{safe}_lineage", lineage, "Which exemplars each task's best program descended from")
    held_out = crl_stats.validation_over_steps(source.attempts[source.attempts["split"] == crl_sources.HELD_OUT])
    if not held_out.empty:
        page.plot(f"{safe}_validation", crl_plots.step_lines(held_out, "step", {"correct_share": "correct share",
                                                                                   "geomean_best": "geomean best speedup"},
                                                              "Held-out tasks per validation", "share / speedup"),
                  "Held-out tasks (job key validation, never trained on): share of correct completions and the geomean "
                  "of the solved tasks' best speedups, after each validation's step")
        page.table(f"{safe}_validation", held_out, "Held-out tasks at each validation (the step it followed)")


def build(args) -> dict:
    os.makedirs(args.out, exist_ok=True)
    plots_dir = os.path.join(args.out, "plots")
    os.makedirs(plots_dir, exist_ok=True)
    for stale in os.listdir(plots_dir):
        if stale.endswith(".png"):
            os.remove(os.path.join(plots_dir, stale))
    tasks_meta = _load_tasks_meta(args.tasks_json)
    labels = crl_sources.unique_labels(args.files)
    sources = [crl_sources.load_source(p, l) for p, l in zip(args.files, labels)]
    global crl_plots  # matplotlib loads in seconds: imported only once the inputs have been read
    import crl_plots
    judged = [s for s in sources if len(s.attempts)]
    checks = [s for s in sources if s.kind == "tasks_check"]
    gpu = next((s.gpu for s in sources if s.gpu), "")
    peaks = crl_stats.gpu_peaks(gpu) if gpu else None
    if args.peak_gbps and args.peak_gflops:
        peaks = (args.peak_gbps, args.peak_gflops)

    page = Page(args.title or "crl report: " + ", ".join(labels), plots_dir)
    summary = {"crl_report_version": REPORT_VERSION, "inputs": [], "peaks": None,
               "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if peaks:
        summary["peaks"] = {"gpu": gpu or "given", "gbytes_per_s": peaks[0], "gflops_per_s": peaks[1]}
    page.heading("Inputs")
    page.table("inputs", pd.DataFrame([{
        "input": s.label, "file": s.path, "kind": s.kind, "GPU": s.gpu or "-", "attempts": len(s.attempts),
        "steps": len(s.steps), "references": len(s.references),
        "git commit": s.meta.get("git_commit", "-")[:12]} for s in sources]))

    best_by_source = {s.label: crl_stats.best_per_task(s.attempts) for s in judged}
    per_level = crl_stats.suite_tasks_per_level(tasks_meta)
    levels_by_source = {s.label: {split: crl_stats.levels_table(a, per_level)
                                  for split, a in crl_stats.by_split(s.attempts).items()} for s in judged}
    task_rows = []
    if judged:
        cuda_l1, fast_p, rates = _levels_frame(levels_by_source)
        page.heading("Speedup per level (CUDA-L1's table)",
                     "Over each task's best correct program: mean, max and quantiles of the speedup against the "
                     "baseline; tasks attempted, with a correct program, and with speedup > 1.01. A run's held-out "
                     "tasks (job key validation, never trained on) and the tasks it trains on are rows apart (split).")
        page.table("cuda_l1", cuda_l1)
        page.heading("fast_p (KernelBench)", "Share of the level's tasks (KernelBench's denominator: every task of "
                     "the level in the suite, attempted or not; without the suite, the attempted tasks; column "
                     "'over') whose best correct program is faster than p times the baseline; geomean: geometric "
                     "mean speedup over tasks with a correct program; pass@k: the chance that k of a task's "
                     "samples hold a correct program (unbiased estimator), over the tasks with at least k.")
        page.table("fast_p", fast_p)
        page.heading("Compile and correctness rates", "Shares of attempts (internal errors, crl's own, left out).")
        page.table("rates", rates)
        # A run's held-out tasks are their own curve (never averaged with the tasks it trains on).
        best_apart = {}
        for src in judged:
            parts = crl_stats.by_split(src.attempts)
            for split, a in parts.items():
                best_apart[f"{src.label} ({split})" if len(parts) > 1 else src.label] = crl_stats.best_per_task(a)
        page.plot("speedup_distribution", crl_plots.speedup_distribution(best_apart),
                  "Best speedup per task, per level")
        page.plot("fast_p", crl_plots.fast_p_curves(best_apart, crl_stats.FAST_P, per_level), "fast_p against p")
        page.plot("per_task_speedup", crl_plots.per_task_speedups(best_apart), "Best speedup per task")

    roofline_points = {}
    for s in judged:
        points = crl_stats.roofline(best_by_source[s.label], tasks_meta, peaks)
        if not points.empty:
            roofline_points[f"{s.label} best"] = points
    for s in checks:
        points = crl_stats.reference_roofline(s.references, peaks)
        if not points.empty:
            roofline_points[f"{s.label} reference"] = points
    if roofline_points:
        peak_text = (f"{peaks[0]:.0f} GB/s, {peaks[1]:.0f} GFLOP/s FP32 ({gpu or 'given'})" if peaks
                     else "unknown GPU (give --peak-gbps and --peak-gflops)")
        page.heading("Distance to the hardware (roofline)",
                     f"Achieved GFLOP/s and GB/s from each task's flops and bytes at its scale; peaks: {peak_text}.")
        page.plot("roofline", crl_plots.roofline(roofline_points, peaks), "Achieved GFLOP/s against arithmetic intensity")
        page.table("roofline_levels", pd.DataFrame([{"input": name, **row} for name, points in roofline_points.items()
                                                    for row in crl_stats.roofline_levels(points)]),
                   "Roofline per level")
        summary["roofline"] = {name: crl_stats.roofline_levels(points) for name, points in roofline_points.items()}
        for name, points in roofline_points.items():
            table_name = "roofline_" + "".join(ch if ch.isalnum() else "_" for ch in name)
            page.table(table_name, points.sort_values(["level", "task"]), f"Roofline: {name}",
                       collapsed=len(points) > 20, md=len(points) <= 20)

    if checks:
        page.heading("Reference checks (crl tasks check)")
        rows = []
        for s in checks:
            for level, v in crl_stats.reference_levels(s.references).items():
                rows.append({"input": s.label, "device": s.gpu, "scale": s.meta.get("scale", "-"), "level": level, **v})
        page.table("reference_levels", pd.DataFrame(rows), "Reference time per level (ms)")
        failed = pd.concat([s.references[s.references["status"] != "ok"].assign(input=s.label) for s in checks])
        page.table("reference_failures", failed[["input", "task", "status"]] if len(failed) else failed,
                   "References whose check failed")

    if len(judged) >= 2:
        merged = pd.concat([b.set_index("task")["best_speedup"].rename(label) for label, b in best_by_source.items()],
                           axis=1)
        merged.index.name = "task"
        merged.insert(0, "level", [crl_sources.level_of(t) for t in merged.index])
        splits = {t: sp for s in judged for t, sp in zip(s.attempts["task"], s.attempts["split"]) if sp}
        if splits:
            merged.insert(1, "split", [splits.get(t, "-") for t in merged.index])
        merged = merged.reset_index().sort_values("task")
        first, *others = list(best_by_source)
        for other in others:
            merged[f"{other} / {first}"] = merged[other] / merged[first]
        page.heading("Side by side", f"Best speedup per task in each input; ratios against {first}.")
        page.table("side_by_side", merged, "Per task", collapsed=len(merged) > 30, md=len(merged) <= 30)

    hacks = [row for s in judged for row in _hack_rows(s)]
    page.heading("Hack report", "Every verdict with a hack or a re-measure: the guard that fired and what it saw.")
    if hacks:
        page.table("hacks", pd.DataFrame(hacks))
    else:
        page.raw("<p>No hacks and no re-measures.</p>")
        page.md += ["No hacks and no re-measures.", ""]

    for s in judged:
        best = best_by_source[s.label]
        correct = best[best["best_speedup"].notna()]
        crl_sources.load_programs(s, correct["program_id"].tolist(), args.examples_dir)
        if len(s.steps):
            _run_sections(page, s, best)
        page.heading(f"Best program per task: {s.label}",
                     "Speedup with its 95% interval; the lines that differ from the reference one click away.")
        rows, diffs = [], []
        split_of = dict(zip(s.attempts["task"], s.attempts["split"]))
        for _, r in best.iterrows():
            rows.append({"task": r["task"], **_split_cell(s, {"split": split_of.get(r["task"], "")}),
                         "attempts": int(r["attempts"]), "correct": int(r["correct"]),
                         "best speedup": r["best_speedup"], "95% low": r["ci_low"], "95% high": r["ci_high"],
                         "program": r["candidate"] if isinstance(r["candidate"], str) else "-"})
            if not math.isnan(r["best_speedup"]):
                program = s.programs.get(int(r["program_id"]))
                diffs.append(_diff_html(_reference_text(r["task"], tasks_meta, args.suite_dir), program,
                                        str(r["candidate"])))
            else:
                diffs.append("no correct program")
        frame = pd.DataFrame(rows)
        if not frame.empty:
            page.table(f"best_{''.join(ch if ch.isalnum() else '_' for ch in s.label)}", frame)
            # The diff column holds HTML: added after the table's cells were escaped.
            page.html[-1] = _with_diff_column(page.html[-1], diffs)
        for _, r in best.iterrows():
            task_rows.append({"input": s.label, "split": split_of.get(r["task"], ""),
                              **{k: r[k] for k in ("task", "level", "attempts", "compiled", "correct",
                                                                     "best_speedup", "ci_low", "ci_high", "candidate",
                                                                     "candidate_us", "reference_us")}})
    for s in sources:
        entry = {"label": s.label, "path": s.path, "kind": s.kind, "gpu": s.gpu, "meta": s.meta,
                 "attempts": int(len(s.attempts))}
        if s.label in levels_by_source:
            by_split = levels_by_source[s.label]
            # "levels": the tasks trained on (or the whole input where it has no held-out tasks), as before
            # held-out validation existed; its held-out tasks apart under levels_by_split.
            entry["levels"] = by_split.get(crl_sources.TRAINED_ON, by_split.get("", {}))
            if len(by_split) > 1 or crl_sources.HELD_OUT in by_split:
                entry["levels_by_split"] = by_split
        if len(s.steps):
            _run_summary(entry, s)
        if s.kind == "tasks_check":
            entry["reference_levels"] = crl_stats.reference_levels(s.references)
        summary["inputs"].append(entry)
    summary["hacks"] = hacks

    tasks = pd.DataFrame(task_rows)
    best_points = [points.drop(columns=["level"]).assign(input=name[: -len(" best")])
                   for name, points in roofline_points.items() if name.endswith(" best")]
    if best_points and not tasks.empty:
        tasks = tasks.merge(pd.concat(best_points, ignore_index=True), on=["input", "task"], how="left")
    tasks.to_csv(os.path.join(args.out, "tasks.csv"), index=False)
    summary["page"] = {"tables": page.tables, "plots": page.plots}
    generated = f"Made by `crl report` from {', '.join(args.files)} at {summary['generated']}."
    if args.stable:
        generated = f"Made by `{args.invocation}`." if args.invocation else \
            f"Made by `crl report` from {', '.join(os.path.basename(f) for f in args.files)}."
        del summary["generated"]
    page.write_html(os.path.join(args.out, "index.html"), generated)
    page.write_md(os.path.join(args.out, "summary.md"), generated)
    if args.md:
        prefix = os.path.relpath(plots_dir, os.path.dirname(os.path.abspath(args.md)) or ".").replace(os.sep, "/")
        page.write_md(args.md, generated, prefix + "/")
    summary = _json_safe(summary)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
    for s in sources:
        if s.results_file is not None:
            s.results_file.close()
    return summary


def _run_summary(entry: dict, s: crl_sources.Source):
    steps = s.steps
    shares = crl_stats.step_status_shares(steps)
    entry["steps"] = {
        "count": int(len(steps)),
        "last_step": int(steps["step"].max()),
        "reward_mean_last": float(steps["reward_mean"].iloc[-1]) if "reward_mean" in steps else None,
        "hack_share_last": float(shares["hack"].iloc[-1]) if "hack" in shares else None,
        "tokens_generated": int(steps["tokens_generated"].sum()) if "tokens_generated" in steps else None,
        "seconds": {k: float(steps[f"seconds_{k}"].sum()) for k in ("generate", "evaluate", "train")
                    if f"seconds_{k}" in steps},
    }


def _with_diff_column(table_html: str, diffs: list[str]) -> str:
    head, _, rest = table_html.partition("</tr>")
    head += "<th>diff against the reference</th></tr>"
    rows = rest.split("</tr>")
    out = []
    for i, row in enumerate(rows[:-1]):
        out.append(row + (f"<td style='text-align:left'>{diffs[i]}</td>" if i < len(diffs) else "") + "</tr>")
    return head + "".join(out) + rows[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="results files (.h5), `crl tasks check` JSON, examples JSON")
    parser.add_argument("--out", required=True, help="the folder to write index.html, summary.md, tasks.csv, "
                                                     "summary.json and plots/ into")
    parser.add_argument("--json", action="store_true", help="also print summary.json on stdout")
    parser.add_argument("--tasks-json", default="", help="task metadata (`crl tasks list --json`): flops and bytes "
                                                         "for the roofline, reference paths for the diffs")
    parser.add_argument("--suite-dir", default="", help="the task suite folder (reference programs for the diffs)")
    parser.add_argument("--examples-dir", default="", help="where the examples JSON's programs live (jobs/examples)")
    parser.add_argument("--peak-gbps", type=float, default=0, help="the GPU's peak bandwidth (GB/s) for the roofline")
    parser.add_argument("--peak-gflops", type=float, default=0, help="the GPU's peak FP32 GFLOP/s for the roofline")
    parser.add_argument("--title", default="", help="the page's title")
    parser.add_argument("--md", default="", help="also write the Markdown summary to this file, its plot links "
                                                  "relative to it (docs/report-example.md)")
    parser.add_argument("--invocation", default="", help=argparse.SUPPRESS)  # the crl command line, for the page
    parser.add_argument("--stable", action="store_true", help="leave times and folders out of the page (for "
                                                              "committed examples)")
    args = parser.parse_args(argv)
    if bool(args.peak_gbps) != bool(args.peak_gflops):
        parser.error("--peak-gbps and --peak-gflops go together")
    try:
        summary = build(args)
    except (crl_results.ResultsFileError, crl_sources.InputProblem) as e:
        print(f"crl report: {e}", file=sys.stderr)
        return EXIT_INPUT
    if args.json:
        json.dump(summary, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(f"crl report: wrote {os.path.join(args.out, 'index.html')} ({len(summary['page']['tables'])} tables, "
              f"{len(summary['page']['plots'])} plots), summary.md, tasks.csv, summary.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.stderr.close()
    except Exception as e:  # noqa: BLE001 - a failure of the report itself: say so, exit 4
        import traceback
        traceback.print_exc()
        print(f"crl report: internal error: {e}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
