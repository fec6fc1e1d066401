"""The plots of `crl report`, drawn with matplotlib (Agg, no display) and returned as PNG bytes.

matplotlib because it is the plotting library the field's papers use, it is on PyPI for the analysis
venv tools/setup.sh makes, and its PNGs embed in a page that needs no network. Each function takes
ready tables (crl_stats) and returns PNG bytes, or None when there is nothing to draw.
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DPI = 80
plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "figure.autolayout": True,
                     "svg.hashsalt": "crl", "path.simplify": True})


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def speedup_distribution(best_by_source: dict) -> bytes | None:
    """Best speedup of each task with a correct program, per level, one box (and its points) per source."""
    groups = []
    for label, best in best_by_source.items():
        for level in sorted(best["level"].unique()):
            values = best[(best["level"] == level)]["best_speedup"].dropna().values
            if len(values):
                groups.append((f"{label}\nlevel {level}" if len(best_by_source) > 1 else f"level {level}", values))
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(groups)), 3.4))
    ax.boxplot([g[1] for g in groups], showfliers=False)
    ax.set_xticks(range(1, len(groups) + 1), [g[0] for g in groups])
    rng = np.random.default_rng(0)
    for i, (_, values) in enumerate(groups, start=1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, s=10, alpha=0.6)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_ylabel("best speedup per task (log)")
    ax.set_title("Speedup distribution per level")
    return _png(fig)


def fast_p_curves(best_by_source: dict, marks, suite_tasks_per_level: dict | None = None) -> bytes | None:
    """fast_p against p for every source and level (overall dashed); the report's p values marked.
    With suite_tasks_per_level the denominator is the level's tasks in the suite, as in the table."""
    per_level = suite_tasks_per_level or {}
    curves = []
    for label, best in best_by_source.items():
        if best.empty:
            continue
        levels = sorted(best["level"].unique())
        for level in [*levels, None]:
            g = best if level is None else best[best["level"] == level]
            name = f"{label} {'all' if level is None else f'level {level}'}" if len(best_by_source) > 1 else \
                ("all" if level is None else f"level {level}")
            suite = sum(per_level.get(int(l), 0) for l in levels) if level is None else per_level.get(int(level), 0)
            speedups = g["best_speedup"].fillna(0).values
            # Tasks of the level never attempted count as not faster (speedup 0).
            missing = max(suite - len(speedups), 0) if all(int(l) in per_level for l in levels) else 0
            curves.append((name, np.concatenate([speedups, np.zeros(missing)]), level is None))
    if not curves:
        return None
    top = max(2.5, max(float(np.nanmax(c[1])) if len(c[1]) else 0 for c in curves) * 1.05)
    p = np.linspace(0, min(top, 10), 400)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for name, speedups, overall in curves:
        ax.plot(p, [(speedups > x).mean() for x in p], ls="--" if overall else "-", label=name)
    for m in marks:
        ax.axvline(m, color="grey", lw=0.5, alpha=0.5)
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p: share of tasks")
    ax.set_ylim(0, 1.02)
    ax.set_title("KernelBench fast_p")
    ax.legend(fontsize=7)
    return _png(fig)


def per_task_speedups(best_by_source: dict) -> bytes | None:
    """Best speedup per task, a bar per task and source, sorted by the first source's speedup."""
    frames = {k: v.set_index("task")["best_speedup"] for k, v in best_by_source.items() if not v.empty}
    frames = {k: v for k, v in frames.items() if v.notna().any()}
    if not frames:
        return None
    first = next(iter(frames.values()))
    tasks = list(first.sort_values(ascending=False).index)
    for v in frames.values():
        tasks += [t for t in v.index if t not in tasks]
    labelled = len(tasks) <= 60
    fig, ax = plt.subplots(figsize=(max(5.0, min(16.0, 0.25 * len(tasks) * len(frames) + 2)), 3.8 if labelled else 3))
    width = 0.8 / len(frames)
    x = np.arange(len(tasks))
    for i, (label, v) in enumerate(frames.items()):
        ax.bar(x + i * width, [v.get(t, np.nan) for t in tasks], width, label=label)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_ylabel("best speedup (log)")
    if labelled:
        ax.set_xticks(x + width * (len(frames) - 1) / 2, [t.split("/")[-1] for t in tasks], rotation=70, fontsize=6,
                      ha="right")
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(tasks)} tasks, sorted")
    if len(frames) > 1:
        ax.legend(fontsize=7)
    ax.set_title("Best speedup per task")
    return _png(fig)


def roofline(points: dict, peaks) -> bytes | None:
    """Achieved GFLOP/s against arithmetic intensity per task, one series per source, under the roofline."""
    points = {k: v for k, v in points.items() if v is not None and not v.empty}
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, frame in points.items():
        ax.scatter(frame["flops_per_byte"], frame["gflops_per_s"], s=12, alpha=0.7, label=label)
    lo = min(float(f["flops_per_byte"].min()) for f in points.values()) / 2
    hi = max(float(f["flops_per_byte"].max()) for f in points.values()) * 2
    if peaks:
        peak_gbps, peak_gflops = peaks
        x = np.geomspace(max(lo, 1e-3), max(hi, peak_gflops / peak_gbps * 4), 200)
        ax.plot(x, np.minimum(peak_gflops, x * peak_gbps), color="black", lw=1,
                label=f"roofline {peak_gbps:.0f} GB/s, {peak_gflops / 1000:.0f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title("Roofline")
    ax.legend(fontsize=7)
    return _png(fig)


def step_lines(frame, x: str, series: dict, title: str, ylabel: str, stacked: bool = False) -> bytes | None:
    """Per-step curves: series maps column -> legend label; stacked draws a stacked area (shares, times)."""
    present = {c: lbl for c, lbl in series.items() if c in frame and frame[c].notna().any()}
    if frame is None or frame.empty or not present:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    if stacked:
        ax.stackplot(frame[x], *[frame[c].fillna(0) for c in present], labels=list(present.values()))
    else:
        for c, lbl in present.items():
            ax.plot(frame[x], frame[c], label=lbl, marker="." if len(frame) < 40 else None)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)
