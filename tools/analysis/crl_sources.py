"""The inputs of `crl report` as uniform tables: results files (HDF5) and `crl tasks check` JSON.

Each input file becomes a Source: its attempts (one row per judged program: a verdict, a rollout
or a measured example), its training steps, and its reference checks. Kinds of input:
- a crl results file (.h5): /verdicts (`crl eval --h5`), /rollouts and /steps (`crl run`);
- a `crl tasks check --out` JSON (an object with "results"): reference times, GFLOP/s, GB/s;
- a list of measured candidates, as tests/suite/examples_gpu_test.cpp writes it
  (objects with task, example, reference_ms, candidate_ms, speedup): correct programs, full scale.
Attempt columns: task, level, scale, baseline, format, status, status_kind, hack_kind, speedup, ci_low,
ci_high, candidate_us, reference_us, program_id, candidate, step, message, split.
format: the program's kind, "crl" or "kernelbench" (a verdict's own column; a run's /meta program_format;
"crl" for files from before either existed and for other inputs).
split: "trained-on" for a run's rollouts, "held-out" for its /validation rows (job key `validation`:
tasks the policy never trains on), "" for verdicts and other inputs. A held-out attempt's program_id
is -(its /validation id + 1), so that it never meets a rollout's or a verdict row's id.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys

import numpy as np
import pandas as pd

import crl_results

ATTEMPT_COLUMNS = ["task", "level", "scale", "baseline", "format", "status", "status_kind", "hack_kind", "speedup",
                   "ci_low", "ci_high", "candidate_us", "reference_us", "program_id", "candidate", "step", "message",
                   "split"]
TRAINED_ON, HELD_OUT = "trained-on", "held-out"
MAX_JSON_BYTES = 256 << 20  # a tasks-check JSON of the whole suite is ~1 MB
LARGE_FILE_BYTES = 64 << 20  # files above this get a progress line
_LEVEL = re.compile(r"level(\d+)/")


@dataclasses.dataclass
class Source:
    label: str
    path: str
    kind: str                 # "results", "tasks_check", "examples"
    attempts: pd.DataFrame    # ATTEMPT_COLUMNS
    steps: pd.DataFrame       # /steps (empty unless a run file)
    rollouts: pd.DataFrame    # /rollouts as read, superseded rows included (empty unless a run file)
    references: pd.DataFrame  # task, level, status, median_ms, gflops_per_s, gbytes_per_s, flops, bytes
    meta: dict
    gpu: str                  # the GPU named by the file, "" when it names none
    programs: dict            # program_id -> program text, for the best programs (filled by load_programs)
    results_file: object = None  # an open crl_results.ResultsFile for later text reads, or None
    verdict_steps: dict = dataclasses.field(default_factory=dict)  # verdict row -> [check steps]
    logs: dict = dataclasses.field(default_factory=dict)           # rollout id -> log text (hacks only)
    validation: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # /validation as read (held-out tasks)


class InputProblem(ValueError):
    """An input file the report cannot read; the message names the file and the field."""


def level_of(task: str) -> int:
    match = _LEVEL.match(str(task))
    return int(match.group(1)) if match else 0


def _progress(path: str, what: str, size: int):
    if size >= LARGE_FILE_BYTES or sys.stderr.isatty():
        print(f"\rcrl report: {os.path.basename(path)} ({size / 1e6:.0f} MB): {what}\033[K", end="", file=sys.stderr,
              flush=True)


def _attempts(rows: dict) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for column in ATTEMPT_COLUMNS:
        if column not in frame:
            frame[column] = pd.Series(dtype=object)
    frame = frame[ATTEMPT_COLUMNS]
    frame["split"] = frame["split"].fillna("").astype(object)
    frame["format"] = frame["format"].fillna("").astype(object).replace("", "crl")
    for column in ("speedup", "ci_low", "ci_high", "candidate_us", "reference_us", "step"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["level"] = frame["task"].map(level_of).astype(int)
    kind, hack = crl_results.split_status(frame["status"]) if len(frame) else (frame["status"], frame["status"])
    frame["status_kind"], frame["hack_kind"] = kind, hack
    return frame


def _from_verdicts(v: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("task", "status", "speedup", "row") if c not in v]
    if missing:
        raise InputProblem(f"table verdicts lacks column(s) {', '.join(missing)}")
    get = lambda name, default: v[name] if name in v else default  # noqa: E731
    return _attempts({
        "task": v["task"], "scale": get("scale", ""), "baseline": _or_default(get("baseline", ""), "eager"),
        "format": _or_default(get("format", ""), "crl"),
        "status": v["status"], "speedup": v["speedup"], "ci_low": get("speedup_ci_low", np.nan),
        "ci_high": get("speedup_ci_high", np.nan), "candidate_us": get("candidate_median_us", np.nan),
        "reference_us": get("reference_median_us", np.nan), "program_id": v["row"],
        "candidate": get("candidate", ""), "step": np.nan, "message": get("message", ""),
    })


def _or_default(column, default: str):
    """A string column with "" (rows written before the column was added to their file) read as `default`."""
    return column.replace("", default) if isinstance(column, pd.Series) else (column or default)


def _from_rollouts(r: pd.DataFrame, table: str = "rollouts", program_format: str = "crl") -> pd.DataFrame:
    """Attempts of /rollouts (trained on) or /validation (held out: its own ids, see the module's doc);
    program_format: the run's (/meta program_format), every rollout's kind."""
    missing = [c for c in ("rollout_id", "task", "status", "speedup") if c not in r]
    if missing:
        raise InputProblem(f"table {table} lacks column(s) {', '.join(missing)}")
    if "superseded" in r:
        r = r[~r["superseded"].astype(bool)]
    held_out = table == "validation"
    get = lambda name, default: r[name] if name in r else default  # noqa: E731
    return _attempts({
        "task": r["task"], "scale": get("scale", ""), "baseline": "eager", "format": program_format or "crl",
        "status": r["status"], "speedup": r["speedup"],
        "ci_low": get("speedup_ci_low", np.nan), "ci_high": get("speedup_ci_high", np.nan),
        "candidate_us": get("candidate_median_us", np.nan), "reference_us": get("reference_median_us", np.nan),
        "program_id": -(r["rollout_id"] + 1) if held_out else r["rollout_id"],
        "candidate": ("validation " if held_out else "rollout ") + r["rollout_id"].astype(str), "step": get("step", np.nan),
        "message": "", "split": HELD_OUT if held_out else TRAINED_ON,
    })


def _gpu_from_meta(meta: dict) -> str:
    names = meta.get("gpu_names", "")
    try:
        parsed = json.loads(names)
        if isinstance(parsed, list) and parsed:
            return str(parsed[0])
    except (ValueError, RecursionError):
        pass
    return names.split(",")[0].strip()


def _load_h5(path: str, label: str) -> Source:
    size = os.path.getsize(path)
    results = crl_results.open_results(path)
    _progress(path, "verdicts", size)
    verdicts = results.verdicts()
    _progress(path, "rollouts", size)
    rollouts = results.rollouts()
    _progress(path, "steps", size)
    steps = results.steps()
    validation = results.validation()
    meta = results.meta()
    try:
        parts = [p for p in (_from_verdicts(verdicts) if len(verdicts) else None,
                             _from_rollouts(rollouts, "rollouts", meta.get("program_format", "crl"))
                             if len(rollouts) else None,
                             _from_rollouts(validation, "validation", meta.get("program_format", "crl"))
                             if len(validation) else None) if p is not None]
    except InputProblem as e:
        raise InputProblem(f"{path}: {e}") from None
    attempts = pd.concat(parts, ignore_index=True) if parts else _attempts({c: [] for c in ATTEMPT_COLUMNS})
    source = Source(label, path, "results", attempts, steps, rollouts, pd.DataFrame(), meta, _gpu_from_meta(meta),
                    {}, results, validation=validation)
    if len(verdicts) and "verdict_steps" in results.text_stores():
        flagged = set(attempts[(attempts["status_kind"] == "hack") & attempts["step"].isna()]["program_id"].astype(int))
        _progress(path, "verdict checks", size)
        for row, text in results.texts("verdict_steps").items():
            try:
                checks = json.loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion limit
                continue
            if not isinstance(checks, list):
                continue
            if int(row) in flagged or any("re-measure" in str(c.get("name", "")) for c in checks
                                               if isinstance(c, dict)):
                source.verdict_steps[int(row)] = [c for c in checks if isinstance(c, dict)]
    hack_rollouts = attempts[(attempts["status_kind"] == "hack") & attempts["step"].notna()]["program_id"].astype(int)
    if len(hack_rollouts):
        source.logs = {int(k): v for k, v in results.texts("logs", ids=hack_rollouts[hack_rollouts >= 0].tolist()).items()}
        held_out = (-hack_rollouts[hack_rollouts < 0] - 1).tolist()
        source.logs.update({-int(k) - 1: v for k, v in results.texts("validation_logs", ids=held_out).items()})
    if size >= LARGE_FILE_BYTES or sys.stderr.isatty():
        print(file=sys.stderr)
    return source


def _read_json(path: str):
    size = os.path.getsize(path)
    if size > MAX_JSON_BYTES:
        raise InputProblem(f"{path}: {size} bytes, more than the {MAX_JSON_BYTES} a report input may have")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputProblem(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise InputProblem(f"{path}: JSON nested deeper than Python reads") from None


def _number(value, path, field):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputProblem(f"{path}: {field} is {value!r}, not a finite number")
    return float(value)


def _load_tasks_check(path: str, doc: dict, label: str) -> Source:
    if not isinstance(doc.get("results"), list):
        raise InputProblem(f"{path}: a tasks-check report needs a 'results' list")
    rows = []
    for i, r in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or not isinstance(r.get("status"), str):
            raise InputProblem(f"{path}: {where} needs string fields id and status")
        ok = r["status"] == "ok"
        rows.append({
            "task": r["id"], "level": level_of(r["id"]), "category": str(r.get("category", "")), "status": r["status"],
            "median_ms": _number(r.get("median_ms"), path, f"{where}.median_ms") if ok else np.nan,
            "gflops_per_s": _number(r.get("gflops_per_s", 0), path, f"{where}.gflops_per_s") if ok else np.nan,
            "gbytes_per_s": _number(r.get("gbytes_per_s", 0), path, f"{where}.gbytes_per_s") if ok else np.nan,
            "flops": _number(r.get("flops", 0), path, f"{where}.flops"),
            "bytes": _number(r.get("bytes", 0), path, f"{where}.bytes"),
            "scale": str(doc.get("scale", "")),
        })
    meta = {k: str(doc[k]) for k in ("device", "backend", "scale", "torch_version") if k in doc}
    empty = _attempts({c: [] for c in ATTEMPT_COLUMNS})
    return Source(label, path, "tasks_check", empty, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(rows), meta,
                  str(doc.get("device", "")), {})


def _load_examples(path: str, doc: list, label: str) -> Source:
    rows = []
    for i, r in enumerate(doc):
        where = f"[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("task"), str):
            raise InputProblem(f"{path}: {where} needs a string field task")
        reference_ms = _number(r.get("reference_ms"), path, f"{where}.reference_ms")
        candidate_ms = _number(r.get("candidate_ms"), path, f"{where}.candidate_ms")
        rows.append({"task": r["task"], "scale": "full", "baseline": "eager", "status": "ok",
                     "speedup": _number(r.get("speedup"), path, f"{where}.speedup"), "ci_low": np.nan,
                     "ci_high": np.nan, "candidate_us": candidate_ms * 1e3, "reference_us": reference_ms * 1e3,
                     "program_id": i, "candidate": str(r.get("example", "")), "step": np.nan, "message": ""})
    return Source(label, path, "examples", _attempts(rows), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {}, "", {})


def load_source(path: str, label: str) -> Source:
    """One input file as a Source; InputProblem or crl_results.ResultsFileError when unreadable."""
    if not os.path.isfile(path):
        raise InputProblem(f"{path}: no such file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x89HDF"):
        return _load_h5(path, label)
    doc = _read_json(path)
    if isinstance(doc, dict) and "results" in doc:
        return _load_tasks_check(path, doc, label)
    if isinstance(doc, list):
        return _load_examples(path, doc, label)
    raise InputProblem(f"{path}: neither a crl results file (HDF5) nor a `crl tasks check` or examples JSON")


def unique_labels(paths: list[str]) -> list[str]:
    """File names without extension, made unique by their parent folder where they clash."""
    stems = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    labels = []
    for path, stem in zip(paths, stems):
        label = stem if stems.count(stem) == 1 else f"{os.path.basename(os.path.dirname(os.path.abspath(path)))}/{stem}"
        while label in labels:
            label += "'"
        labels.append(label)
    return labels


def load_programs(source: Source, program_ids: list, examples_dir: str = ""):
    """Fills source.programs for these ids: /text/programs (rollouts), /text/validation_programs (held-out
    attempts' negative ids), a verdict_program store if the file has one, or the example's file under
    examples_dir/level<N>/ for examples inputs."""
    ids = [int(i) for i in program_ids]
    if source.kind == "results" and source.results_file is not None:
        own = [i for i in ids if i >= 0]
        for store in ("programs", "verdict_program"):
            found = source.results_file.texts(store, ids=own)
            source.programs.update({int(k): v for k, v in found.items()})
        held_out = [-i - 1 for i in ids if i < 0]  # /validation's ids (see the module's doc)
        if held_out:
            found = source.results_file.texts("validation_programs", ids=held_out)
            source.programs.update({-int(k) - 1: v for k, v in found.items()})
    elif source.kind == "examples" and examples_dir:
        for i in ids:
            row = source.attempts[source.attempts["program_id"] == i].iloc[0]
            path = os.path.join(examples_dir, f"level{row['level']}", os.path.basename(row["candidate"]))
            if os.path.isfile(path) and os.path.getsize(path) < (1 << 20):
                with open(path, encoding="utf-8", errors="replace") as f:
                    source.programs[i] = f.read()
