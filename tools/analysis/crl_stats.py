"""The statistics of `crl report`: the literature's tables computed from a Source's attempts.

Definitions (docs/report.md says the same, for readers of the page):
- attempts: every judged program, except status internal_error (crl's own failure) and superseded
  rollouts; a task is attempted when it has an attempt.
- compiled: status is neither compile_error nor format_error; correct: status ok with a finite
  speedup > 0 (hacks are not correct).
- a task's best: its correct attempt with the highest speedup (and that attempt's 95% interval).
- CUDA-L1's table (per level and overall): over the best speedups of the tasks with a correct
  program: mean, max, 75% / 50% / 25% quantiles (numpy's linear interpolation); the number of
  attempted tasks, of tasks with a correct program, and of tasks whose best speedup is > 1.01.
- KernelBench's fast_p: (tasks whose best correct speedup is > p) / (the level's tasks), its
  denominator as KernelBench's eval_from_generations counts it: every task of the level in the
  suite (from `crl tasks list --json`), attempted or not; where the suite is not known, the
  attempted tasks (`fast_p_denominator` says which). fast_0 is the share of tasks with a correct
  program. geomean: the geometric mean of the best speedups of
  the tasks with a correct program.
- pass@k (Chen et al.'s unbiased estimator, as KernelBench's eval reports it): per task with n
  counted attempts of which c are correct, 1 - C(n-c, k) / C(n, k), averaged over the tasks with at
  least k attempts (null where none has; `pass_at_k_tasks` says how many were averaged).
- compile / correct / hack rates: shares of attempts.
- splits: a run's held-out tasks (its /validation, job key `validation`) and the tasks it trains on are
  counted apart in every table (by_split); files without held-out tasks have one split, "".
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
PASS_AT_K = (1, 5, 10)
FASTER_THAN = 1.01  # CUDA-L1 counts a task as sped up above this
NOT_COMPILED = ("compile_error", "format_error")

# Peaks of a GPU for the roofline: HBM bandwidth (GB/s) and dense FP32 without tensor cores (GFLOP/s),
# the arithmetic the suite's float32 references use (NVIDIA's data sheets). Matched by substring of
# the GPU's name, longest first; `crl report --peak-gbps/--peak-gflops` overrides.
GPU_PEAKS = {
    "H200": (4800.0, 67000.0),
    "H100 PCIe": (2000.0, 51000.0),
    "H100": (3350.0, 67000.0),
    "A100-SXM4-80GB": (2039.0, 19500.0),
    "A100": (1555.0, 19500.0),
    "L40S": (864.0, 91600.0),
}


def gpu_peaks(gpu: str):
    """(GB/s, GFLOP/s) for a GPU name, or None when the table does not know it."""
    for key in sorted(GPU_PEAKS, key=len, reverse=True):
        if key.lower() in gpu.lower():
            return GPU_PEAKS[key]
    return None


def counted(attempts: pd.DataFrame) -> pd.DataFrame:
    """Attempts that count (internal errors are crl's failures, not the program's), with flags."""
    a = attempts[attempts["status_kind"] != "internal_error"].copy()
    a["compiled"] = ~a["status_kind"].isin(NOT_COMPILED)
    a["correct"] = (a["status_kind"] == "ok") & np.isfinite(a["speedup"]) & (a["speedup"] > 0)
    return a


def best_per_task(attempts: pd.DataFrame) -> pd.DataFrame:
    """One row per attempted task: counts of attempts, compiled and correct, and the best correct attempt
    (best_speedup NaN when none is correct)."""
    a = counted(attempts)
    if a.empty:
        return pd.DataFrame(columns=["task", "level", "attempts", "compiled", "correct", "best_speedup", "ci_low",
                                     "ci_high", "program_id", "candidate", "candidate_us", "reference_us", "scale",
                                     "step"])
    per_task = a.groupby("task").agg(level=("level", "first"), attempts=("status", "size"),
                                     compiled=("compiled", "sum"), correct=("correct", "sum"))
    good = a[a["correct"]].sort_values(["task", "speedup"], ascending=[True, False]).drop_duplicates("task")
    good = good.set_index("task")[["speedup", "ci_low", "ci_high", "program_id", "candidate", "candidate_us",
                                   "reference_us", "scale", "step"]].rename(columns={"speedup": "best_speedup"})
    out = per_task.join(good, how="left").reset_index()
    out["level"] = out["level"].astype(int)
    return out.sort_values("task").reset_index(drop=True)


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def geomean(values) -> float:
    v = _finite(values)
    v = v[v > 0]
    return float(math.exp(np.log(v).mean())) if len(v) else float("nan")


def pass_at_k(best: pd.DataFrame, k: int) -> tuple[float | None, int]:
    """(mean pass@k over the tasks with at least k attempts, None when there is none; how many)."""
    values = []
    for n, c in zip(best["attempts"], best["correct"]) if len(best) else []:
        n, c = int(n), int(c)
        if n >= k:
            values.append(1.0 - math.comb(n - c, k) / math.comb(n, k))
    return (float(np.mean(values)) if values else None), len(values)


def level_summary(best: pd.DataFrame, attempts: pd.DataFrame, suite_tasks: int = 0) -> dict:
    """CUDA-L1's row, fast_p, geomean and the rates for one group of tasks (see the module's doc);
    suite_tasks: how many tasks the group has in the suite (0: not known)."""
    a = counted(attempts)
    speedups = _finite(best["best_speedup"]) if len(best) else np.array([])
    tasks = int(len(best))
    over = max(suite_tasks, tasks) if suite_tasks else tasks
    passes = {k: pass_at_k(best, k) for k in PASS_AT_K}
    quantile = (lambda q: float(np.quantile(speedups, q))) if len(speedups) else (lambda q: float("nan"))
    n_attempts = int(len(a))
    share = (lambda n: n / n_attempts) if n_attempts else (lambda n: float("nan"))
    return {
        "tasks": tasks,
        "tasks_correct": int(len(speedups)),
        "tasks_faster": int((speedups > FASTER_THAN).sum()),
        "mean": float(speedups.mean()) if len(speedups) else float("nan"),
        "max": float(speedups.max()) if len(speedups) else float("nan"),
        "q75": quantile(0.75),
        "median": quantile(0.5),
        "q25": quantile(0.25),
        "geomean": geomean(speedups),
        "fast_p": {f"{p:g}": (float((speedups > p).sum()) / over if over else float("nan")) for p in FAST_P},
        "fast_p_denominator": f"the level's {over} tasks" if suite_tasks else f"the {tasks} attempted tasks",
        "pass_at_k": {str(k): passes[k][0] for k in PASS_AT_K},
        "pass_at_k_tasks": {str(k): passes[k][1] for k in PASS_AT_K},
        "attempts": n_attempts,
        "compile_rate": share(int(a["compiled"].sum())),
        "correct_rate": share(int(a["correct"].sum())),
        "hack_rate": share(int((a["status_kind"] == "hack").sum())),
        "status_counts": {str(k): int(v) for k, v in a["status"].value_counts().sort_index().items()},
    }


def group_key(baseline: str, program_format: str) -> str:
    """A levels table's key: the baseline for crl's own programs ("eager"), "baseline+format" for
    another kind ("eager+kernelbench"), so a file of .crl programs keeps the keys it always had."""
    return baseline if program_format in ("", "crl") else f"{baseline}+{program_format}"


def split_group_key(key: str) -> tuple[str, str]:
    """(baseline, format) of a group_key."""
    baseline, _, program_format = key.partition("+")
    return baseline, program_format or "crl"


def levels_table(attempts: pd.DataFrame, suite_tasks_per_level: dict | None = None) -> dict:
    """{group_key(baseline, format): {"level1": summary, ..., "all": summary}} for every baseline and
    program format the attempts name; suite_tasks_per_level ({level: tasks in the suite}) makes fast_p's
    denominator the level's tasks ("all": the tasks of the levels attempted)."""
    per_level = suite_tasks_per_level or {}
    out = {}
    formats = attempts["format"].fillna("crl") if "format" in attempts else pd.Series("crl", index=attempts.index)
    for (baseline, program_format), group in attempts.groupby([attempts["baseline"], formats], sort=True) if len(attempts) else []:
        best = best_per_task(group)
        rows = {}
        levels = sorted(best["level"].unique())
        for level in levels:
            rows[f"level{level}" if level else "other"] = level_summary(best[best["level"] == level],
                                                                        group[group["level"] == level],
                                                                        per_level.get(int(level), 0))
        known = all(int(level) in per_level for level in levels)
        rows["all"] = level_summary(best, group, sum(per_level[int(level)] for level in levels) if known and levels else 0)
        out[group_key(str(baseline), str(program_format))] = rows
    return out


def suite_tasks_per_level(tasks_meta: dict) -> dict:
    """{level: number of tasks} of `crl tasks list --json`'s tasks (keyed by id)."""
    counts: dict = {}
    for meta in tasks_meta.values():
        level = meta.get("level")
        if isinstance(level, int):
            counts[level] = counts.get(level, 0) + 1
    return counts


def roofline(best: pd.DataFrame, tasks_meta: dict, peaks) -> pd.DataFrame:
    """Per task with a known time and known flops/bytes at its scale: achieved GFLOP/s and GB/s, the
    arithmetic intensity, and with peaks the fractions of peak bandwidth, compute and the roofline."""
    rows = []
    for _, r in best.iterrows():
        meta = tasks_meta.get(r["task"], {})
        scale = meta.get("scales", {}).get(str(r.get("scale", "")) or "full", {})
        flops, nbytes, t_us = scale.get("flops"), scale.get("bytes"), r.get("candidate_us")
        if not flops or not nbytes or not (isinstance(t_us, float) and math.isfinite(t_us) and t_us > 0):
            continue
        rows.append(_roofline_row(r["task"], int(r["level"]), float(flops), float(nbytes), t_us, peaks))
    return pd.DataFrame(rows)


def _roofline_row(task, level, flops, nbytes, t_us, peaks) -> dict:
    gflops, gbps = flops / (t_us * 1e3), nbytes / (t_us * 1e3)
    row = {"task": task, "level": level, "time_us": t_us, "gflops_per_s": gflops, "gbytes_per_s": gbps,
           "flops_per_byte": flops / nbytes}
    if peaks:
        peak_gbps, peak_gflops = peaks
        attainable = min(peak_gflops, flops / nbytes * peak_gbps)
        row.update({"fraction_of_peak_bandwidth": gbps / peak_gbps, "fraction_of_peak_compute": gflops / peak_gflops,
                    "fraction_of_roofline": gflops / attainable})
    return row


def reference_roofline(references: pd.DataFrame, peaks) -> pd.DataFrame:
    """The same figures for reference checks (`crl tasks check` JSON)."""
    rows = []
    for _, r in references.iterrows():
        if r["status"] == "ok" and r["flops"] > 0 and r["bytes"] > 0 and r["median_ms"] > 0:
            rows.append(_roofline_row(r["task"], int(r["level"]), r["flops"], r["bytes"], r["median_ms"] * 1e3, peaks))
    return pd.DataFrame(rows)


def reference_levels(references: pd.DataFrame) -> dict:
    """Per level: tasks checked, ok, and the median / geomean reference time (ms)."""
    out = {}
    for level, g in references.groupby("level"):
        ok = g[g["status"] == "ok"]
        out[f"level{level}"] = {"tasks": int(len(g)), "ok": int(len(ok)),
                                "median_ms": float(ok["median_ms"].median()) if len(ok) else float("nan"),
                                "geomean_ms": geomean(ok["median_ms"]),
                                "total_ms": float(ok["median_ms"].sum())}
    return out


STATUS_COLUMNS = ["n_ok", "n_compile_error", "n_runtime_error", "n_timeout", "n_crash", "n_mismatch", "n_hack",
                  "n_format_error", "n_internal_error"]


def step_status_shares(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step, each status's share of the step's rollouts (from the n_* columns)."""
    present = [c for c in STATUS_COLUMNS if c in steps]
    counts = steps[present].astype(float)
    total = counts.sum(axis=1).replace(0, np.nan)
    shares = counts.div(total, axis=0)
    shares.columns = [c[2:] for c in present]
    shares.insert(0, "step", steps["step"].values)
    return shares


def hack_kinds_per_step(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per step, each hack kind's share of that step's counted rollouts (the hacking ratio by kind)."""
    if rollouts.empty or "status" not in rollouts:
        return pd.DataFrame()
    r = rollouts[~rollouts["superseded"].astype(bool)] if "superseded" in rollouts else rollouts
    r = r[r["status"] != "internal_error"]
    hacks = r[r["status"].str.startswith("hack")]
    if hacks.empty:
        return pd.DataFrame()
    table = hacks.groupby(["step", "status"]).size().unstack(fill_value=0)
    return table.div(r.groupby("step").size(), axis=0).fillna(0).reset_index()


def rewarded_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """/steps with the reward columns NaN on sft steps: they have no rollouts, so no reward (the
    file holds 0 there), and a plot must not draw them as a reward of 0."""
    if steps.empty or "stage" not in steps:
        return steps
    out = steps.copy()
    sft = out["stage"] == "sft"
    for column in ("reward_mean", "reward_median", "reward_max"):
        if column in out:
            out.loc[sft, column] = np.nan
    return out


def best_over_steps(attempts: pd.DataFrame) -> pd.DataFrame:
    """Per step with rollouts: tasks with a correct program so far, and the geomean over them of each
    one's best so far, carried forward over the steps where it wrote no correct program."""
    a = counted(attempts)
    all_steps = sorted(a["step"].dropna().unique()) if "step" in a else []
    a = a[a["correct"] & a["step"].notna()]
    if a.empty:
        return pd.DataFrame()
    per = a.groupby(["step", "task"])["speedup"].max().unstack()
    # cummax leaves a step without a correct program NaN; the best so far stands there.
    best_so_far = per.reindex(sorted(set(all_steps) | set(per.index))).cummax().ffill().dropna(how="all")
    rows = [{"step": int(step), "tasks_correct": int(row.notna().sum()), "geomean_best": geomean(row.values),
             "max_best": float(np.nanmax(row.values))} for step, row in best_so_far.iterrows()]
    return pd.DataFrame(rows)


def exemplar_lineage(best: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """For each task's best rollout: the exemplars its prompt showed (id, step, speedup)."""
    if rollouts.empty or "exemplar_ids" not in rollouts or best.empty:
        return pd.DataFrame()
    by_id = rollouts.drop_duplicates("rollout_id").set_index("rollout_id")
    rows = []
    for _, r in best[best["step"].notna()].iterrows():
        rid = int(r["program_id"])
        if rid not in by_id.index:
            continue
        parents = []
        for p in _exemplar_ids(by_id.at[rid, "exemplar_ids"]):
            if p in by_id.index:
                parents.append(f"{p} (step {int(by_id.at[p, 'step'])}, {by_id.at[p, 'speedup']:.2f}x)")
            else:
                parents.append(f"{p} (not in this file)")
        rows.append({"task": r["task"], "best_rollout": rid, "best_speedup": r["best_speedup"],
                     "exemplars": "; ".join(parents) if parents else "none",
                     "line of descent": " <- ".join(str(i) for i in _descent(rid, by_id))})
    return pd.DataFrame(rows)


def _exemplar_ids(text) -> list[int]:
    out = []
    for s in str(text).split(","):
        try:
            out.append(int(s.strip()))
        except ValueError:
            pass
    return out


def _descent(rid: int, by_id: pd.DataFrame, limit: int = 8) -> list[int]:
    """rid, then its fastest correct exemplar, then that one's, ... (ids in this file, no cycles)."""
    line = [rid]
    while len(line) < limit:
        parents = [p for p in _exemplar_ids(by_id.at[line[-1], "exemplar_ids"]) if p in by_id.index and p not in line]
        if not parents:
            break
        line.append(max(parents, key=lambda p: (str(by_id.at[p, "status"]) == "ok", float(by_id.at[p, "speedup"]))))
    return line


def by_split(attempts: pd.DataFrame) -> dict:
    """{split: its attempts} (split: "trained-on", "held-out", or "" where the input has none), so that a
    run's held-out tasks (job key `validation`) are never averaged with the tasks it trains on."""
    if attempts.empty or "split" not in attempts:
        return {"": attempts}
    groups = {str(split): group for split, group in attempts.groupby("split", sort=True)}
    return dict(sorted(groups.items(), key=lambda item: item[0] == "held-out"))  # the trained-on tasks first


def validation_over_steps(attempts: pd.DataFrame) -> pd.DataFrame:
    """Per validation (the step it followed) of a run's held-out attempts: completions, the share that is
    correct, tasks with a correct program, and the geomean of those tasks' best speedups."""
    a = counted(attempts)
    a = a[a["step"].notna()] if "step" in a else a.iloc[0:0]
    rows = []
    for step, group in a.groupby("step"):
        best = group[group["correct"]].groupby("task")["speedup"].max()
        rows.append({"step": int(step), "tasks": int(group["task"].nunique()), "completions": int(len(group)),
                     "correct_share": float(group["correct"].mean()), "tasks_correct": int(len(best)),
                     "geomean_best": geomean(best.values)})
    return pd.DataFrame(rows)


def roofline_levels(points: pd.DataFrame) -> list[dict]:
    """Per level of a roofline table: tasks, median achieved GB/s and GFLOP/s, and with peaks the median
    fraction of the roofline and how many tasks reach half of it."""
    rows = []
    for level, g in points.groupby("level"):
        row = {"level": f"level{level}", "tasks": int(len(g)), "median GB/s": float(g["gbytes_per_s"].median()),
               "median GFLOP/s": float(g["gflops_per_s"].median())}
        if "fraction_of_roofline" in g:
            row.update({"median fraction of roofline": float(g["fraction_of_roofline"].median()),
                        "tasks at >= 50% of roofline": int((g["fraction_of_roofline"] >= 0.5).sum())})
        rows.append(row)
    return rows
