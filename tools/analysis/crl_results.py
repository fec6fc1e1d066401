"""crl_results: crl results files (HDF5, docs/results-format.md) as pandas DataFrames.

For notebooks and for `crl report` (tools/analysis/crl_report.py). Needs h5py, numpy and pandas
(tools/setup.sh installs them into ~/.local/share/crl/venv):

    import sys; sys.path.insert(0, "tools/analysis")
    import crl_results
    run = crl_results.load("results/run.h5")       # every table (rows a resume re-did left out:
                                                    # superseded=True keeps them), /meta, optionally every text
    run.steps.plot(x="step", y="reward_mean")      # /steps: one row per training step
    run.rollouts.groupby("task").speedup.max()     # /rollouts: one row per evaluated completion
    run.validation                                  # /validation: held-out tasks (job key `validation`)
    run.verdicts                                    # /verdicts: what `crl eval --h5` writes
    run.meta["git_commit"], run.job_config          # /meta attributes; job_config parsed from JSON

    with crl_results.open_results("results/run.h5") as f:   # read only what you need
        f.tables()                                   # names of the tables the file has
        f.texts("programs", ids=[17, 42])            # pandas Series: rollout_id -> program text

A table the file lacks (an eval file has no /steps) reads as an empty DataFrame with that table's
documented columns, so code written for runs works on eval files too.

What is checked when the file opens, before anything is read (a bad file raises ResultsFileError
naming the file and the field, never allocates what it claims), as crl's C++ reader checks it:
- the root says crl_format = "crl-results", version 1; it holds /meta, /text and tables only;
- /meta holds single string attributes only;
- table, column, store and meta names follow the format's rule (1 to 64 of A-Z a-z 0-9 _, not
  starting with a digit), column lists hold no duplicates and list every dataset of their group;
- every column is a 1-D int64, float64, bool or UTF-8 string dataset, and its row count fits in
  the bytes the file (and the dataset's own storage) actually holds;
- the columns of a documented table (/verdicts, /steps, /rollouts, /validation, /samples) have their documented types (a
  string speedup column is an error, not a column of NaN);
- all columns of a table have one length; a text store is (id int64, text string), ids unique.
An HDF5 error while reading (a damaged heap or chunk) is a ResultsFileError naming the file too.
A file being written is read as of its last flush (HDF5 file locking off); a read that overlaps a
flush is retried a few times.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import time

import h5py
import numpy as np
import pandas as pd

FORMAT_NAME = "crl-results"
FORMAT_VERSIONS = (1,)
NAME_RULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
MAX_COLUMNS = 4096  # far above any crl table; a file claiming more is damaged
READ_ATTEMPTS = 4   # a read overlapping the writer's flush can fail; the next one sees the flushed state

# The documented tables (types as crl names them), for empty stand-ins and for the report's checks.
VERDICT_COLUMNS = {
    "row": "int64", "task": "string", "candidate": "string", "backend": "string", "scale": "string",
    "status": "string", "message": "string", "trials_run": "int64", "trials_passed": "int64",
    "reference_median_us": "float64", "reference_iqr_us": "float64", "reference_samples": "int64",
    "candidate_median_us": "float64", "candidate_iqr_us": "float64", "candidate_samples": "int64",
    "speedup": "float64", "speedup_ci_low": "float64", "speedup_ci_high": "float64",
    "reward": "float64", "seconds": "float64", "baseline": "string", "speedup_ci_half_width": "float64",
    "format": "string",
}
STEP_COLUMNS = {
    "step": "int64", "stage": "string", "policy_version": "int64", "loss": "float64",
    "grad_norm": "float64", "lr": "float64", "skipped": "bool", "reward_mean": "float64",
    "reward_median": "float64", "reward_max": "float64", "n_ok": "int64", "n_compile_error": "int64",
    "n_runtime_error": "int64", "n_timeout": "int64", "n_crash": "int64", "n_mismatch": "int64",
    "n_hack": "int64", "n_format_error": "int64", "n_internal_error": "int64",
    "tokens_generated": "int64", "tokens_trained": "int64", "seconds_generate": "float64",
    "seconds_evaluate": "float64", "seconds_train": "float64", "evaluator_busy_fraction": "float64",
    "trainer_wait_seconds": "float64", "seconds_step": "float64", "restart": "int64", "superseded": "bool",
    "entropy": "float64", "kl": "float64", "clip_fraction": "float64", "completion_tokens_mean": "float64",
    "completion_tokens_max": "float64", "advantage_mean": "float64", "advantage_std": "float64",
    "zero_advantage_fraction": "float64",
}
# /steps columns added after files were written without them (NaN there: not measured).
STEP_TELEMETRY_COLUMNS = ("entropy", "kl", "clip_fraction", "completion_tokens_mean", "completion_tokens_max",
                          "advantage_mean", "advantage_std", "zero_advantage_fraction")
ROLLOUT_COLUMNS = {
    "rollout_id": "int64", "step": "int64", "stage": "string", "task": "string", "group": "int64",
    "sample": "int64", "status": "string", "speedup": "float64", "speedup_ci_low": "float64",
    "speedup_ci_high": "float64", "reward": "float64", "normalized_reward": "float64",
    "advantage": "float64", "completion_tokens": "int64", "evaluator_rank": "int64",
    "exemplar_ids": "string", "policy_version": "int64", "restart": "int64", "superseded": "bool",
    "candidate_median_us": "float64", "reference_median_us": "float64", "scale": "string",
    "speedup_ci_half_width": "float64",
}
# `crl eval-model`'s samples (their verdicts are /verdicts rows, candidate "sample S").
SAMPLE_COLUMNS = {
    "sample_id": "int64", "task": "string", "sample": "int64", "prompt_tokens": "int64", "completion_tokens": "int64",
    "finish_reason": "string",
}
# /validation (a job's held-out tasks, job key `validation`) has /rollouts' columns, its ids its own.
KNOWN_TABLES = {"verdicts": VERDICT_COLUMNS, "steps": STEP_COLUMNS, "rollouts": ROLLOUT_COLUMNS,
                "validation": ROLLOUT_COLUMNS, "samples": SAMPLE_COLUMNS}
TEXT_COLUMNS = {"id": "int64", "text": "string"}
RUN_TEXT_STORES = ("prompts", "completions", "programs", "logs")  # keyed by rollout_id
VALIDATION_TEXT_STORES = tuple("validation_" + s for s in RUN_TEXT_STORES)  # keyed by /validation's rollout_id
VERDICT_TEXT_STORES = ("verdict_compile_log", "verdict_worker_log", "verdict_steps", "verdict_program")  # keyed by row

_NUMPY_TYPES = {"int64": np.int64, "float64": np.float64, "bool": np.bool_, "string": object}
# Bytes one row of a column takes in the file at least (a string row is a heap reference).
_MIN_ROW_BYTES = {"int64": 8, "float64": 8, "bool": 1, "string": 8}


class ResultsFileError(ValueError):
    """A file that is not a readable crl results file; the message names the file and the field."""


def check_name(what: str, name: str, path: str) -> str:
    if not isinstance(name, str) or not NAME_RULE.match(name):
        raise ResultsFileError(f"{path}: {what} name {name!r} breaks the naming rule "
                               "(1 to 64 of A-Z a-z 0-9 _, not starting with a digit; docs/results-format.md)")
    return name


def column_type(dataset: h5py.Dataset) -> str | None:
    """'int64', 'float64', 'bool' or 'string' as crl names them; None for anything else."""
    dtype = dataset.dtype
    if h5py.check_string_dtype(dtype) is not None:
        return "string" if h5py.check_vlen_dtype(dtype) is not None else None
    if dtype == np.bool_:
        return "bool"
    if dtype == np.dtype("<i8"):
        return "int64"
    if dtype == np.dtype("<f8"):
        return "float64"
    return None


def empty_frame(columns: dict) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=_NUMPY_TYPES[t]) for c, t in columns.items()})


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class ResultsFile:
    """An open crl results file (read only). Use as a context manager; see the module's doc."""

    def __init__(self, path: str):
        self.path = str(path)
        if os.path.isdir(self.path):
            raise ResultsFileError(f"{self.path}: a folder, not a results file")
        try:
            self.file_bytes = os.path.getsize(self.path)
            self._h5 = h5py.File(self.path, "r", locking=False)
        except FileNotFoundError:
            raise ResultsFileError(f"{self.path}: no such file") from None
        except OSError as e:
            raise ResultsFileError(f"{self.path}: not an HDF5 file h5py can open ({e})") from None

        try:
            self._check_format()
            self._validate()
        except ResultsFileError:
            self.close()
            raise
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
            self.close()
            raise ResultsFileError(f"{self.path}: cannot be read (a damaged file?): {type(e).__name__}: {e}") from None

    def _check_format(self):
        fmt = self._h5.attrs.get("crl_format", "")
        if not isinstance(fmt, (str, bytes)) or _text(fmt) != FORMAT_NAME:
            raise ResultsFileError(f"{self.path}: not a crl results file (attribute crl_format on / is {fmt!r}, "
                                   f"not {FORMAT_NAME!r})")
        version = self._h5.attrs.get("crl_format_version")
        if (version is None or np.asarray(version).dtype.kind not in "iu" or np.asarray(version).size != 1
                or int(np.asarray(version).reshape(-1)[0]) not in FORMAT_VERSIONS):
            raise ResultsFileError(f"{self.path}: crl_format_version {version!r} is not one this reader knows "
                                   f"({', '.join(map(str, FORMAT_VERSIONS))})")

    def close(self):
        self._h5.close()

    def _validate(self):
        """The layout check (docs/results-format.md), before anything is read."""
        for name, obj in self._h5.items():
            if name == "meta":
                if not isinstance(obj, h5py.Group) or len(obj):
                    raise ResultsFileError(f"{self.path}: /meta is not a group of attributes only")
                self.meta()
            elif name == "text":
                if not isinstance(obj, h5py.Group):
                    raise ResultsFileError(f"{self.path}: /text is not a group")
                for store, group in obj.items():
                    check_name("text store", store, self.path)
                    self._checked_group(group, f"text store /text/{store}", "text")
            else:
                check_name("table", name, self.path)
                self._checked_group(obj, f"table /{name}", "table")

    def _checked_group(self, group, where: str, kind: str):
        if not isinstance(group, h5py.Group):
            raise ResultsFileError(f"{self.path}: {where} is not a group")
        found = group.attrs.get("crl_kind")
        if not isinstance(found, (str, bytes)) or _text(found) != kind:
            raise ResultsFileError(f"{self.path}: {where} has crl_kind {found!r}, not {kind!r}")
        columns = self._checked_columns(group, where)
        listed = {n for n, _, _ in columns}
        extra = sorted(set(group.keys()) - listed)
        if extra:
            raise ResultsFileError(f"{self.path}: {where} holds {extra}, which its crl_columns do not list")
        lengths = {n: int(d.shape[0]) for n, d, _ in columns}
        if len(set(lengths.values())) > 1:
            raise ResultsFileError(f"{self.path}: {where} is damaged: its columns differ in length ({lengths})")
        documented = TEXT_COLUMNS if kind == "text" else KNOWN_TABLES.get(where[len("table /"):], {})
        for name, _, found_type in columns:
            want = documented.get(name)
            if want is not None and found_type != want:
                raise ResultsFileError(f"{self.path}: {where}/{name} holds {found_type}, not {want} "
                                       "(docs/results-format.md)")
        if kind == "text":
            if listed != set(TEXT_COLUMNS):
                raise ResultsFileError(f"{self.path}: {where} has columns {sorted(listed)}, not id and text")
            ids = np.asarray(group["id"][:], dtype=np.int64)
            if len(np.unique(ids)) != len(ids):
                raise ResultsFileError(f"{self.path}: {where} holds an id twice")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- what the file has ---------------------------------------------------------------
    def tables(self) -> list[str]:
        return sorted(k for k, v in self._h5.items()
                      if isinstance(v, h5py.Group) and _text(v.attrs.get("crl_kind", "")) == "table")

    def text_stores(self) -> list[str]:
        group = self._h5.get("text")
        if not isinstance(group, h5py.Group):
            return []
        return sorted(k for k, v in group.items()
                      if isinstance(v, h5py.Group) and _text(v.attrs.get("crl_kind", "")) == "text")

    def has_table(self, name: str) -> bool:
        return name in self.tables()

    def meta(self) -> dict[str, str]:
        """/meta's attributes as strings (JSON values are JSON text: see job_config())."""
        group = self._h5.get("meta")
        if not isinstance(group, h5py.Group):
            return {}
        out = {}
        for key in group.attrs:
            check_name("meta key", key, self.path)
            value = group.attrs[key]
            if not isinstance(value, (str, bytes)):
                raise ResultsFileError(f"{self.path}: /meta attribute {key!r} is {type(value).__name__} "
                                       f"{np.asarray(value).dtype}, not a string")
            out[key] = _text(value)
        return out

    # --- tables ------------------------------------------------------------------------------
    def _checked_columns(self, group: h5py.Group, where: str) -> list[tuple[str, h5py.Dataset, str]]:
        raw = group.attrs.get("crl_columns")
        if raw is None:
            raise ResultsFileError(f"{self.path}: {where} has no crl_columns attribute")
        names = [_text(n) for n in np.asarray(raw, dtype=object).reshape(-1)]
        if not names or len(names) > MAX_COLUMNS:
            raise ResultsFileError(f"{self.path}: {where} lists {len(names)} columns (1 to {MAX_COLUMNS} expected)")
        if len(set(names)) != len(names):
            raise ResultsFileError(f"{self.path}: {where} lists a column twice: {names}")
        storage_bound = self.file_bytes
        out = []
        for name in names:
            check_name(f"{where} column", name, self.path)
            dataset = group.get(name)
            if not isinstance(dataset, h5py.Dataset):
                raise ResultsFileError(f"{self.path}: {where} lists column {name!r} but has no such dataset")
            kind = column_type(dataset)
            if dataset.ndim != 1 or kind is None:
                raise ResultsFileError(f"{self.path}: {where}/{name} is a {dataset.ndim}-D {dataset.dtype} dataset, "
                                       "not a 1-D int64, float64, bool or string column")
            rows = int(dataset.shape[0])
            stored = min(storage_bound, int(dataset.id.get_storage_size()))
            if rows * _MIN_ROW_BYTES[kind] > stored:
                raise ResultsFileError(f"{self.path}: {where}/{name} claims {rows} rows, more than its {stored} stored "
                                       f"bytes can hold ({_MIN_ROW_BYTES[kind]} bytes a row): a damaged file")
            out.append((name, dataset, kind))
        return out

    def _read_group(self, group: h5py.Group, where: str, rows: slice | np.ndarray | None = None) -> pd.DataFrame:
        columns = self._checked_columns(group, where)
        count = min(int(d.shape[0]) for _, d, _ in columns)
        selection = slice(0, count) if rows is None else rows
        data = {}
        for name, dataset, kind in columns:
            if kind == "string":
                values = dataset.asstr(errors="replace")[selection]
                data[name] = np.asarray(values, dtype=object)
            else:
                data[name] = np.asarray(dataset[selection], dtype=_NUMPY_TYPES[kind])
        return pd.DataFrame(data)

    def table(self, name: str) -> pd.DataFrame | None:
        """Any table by name as a DataFrame (columns in the file's order); None when absent."""
        check_name("table", name, self.path)
        if not self.has_table(name):
            return None
        return _retry(lambda: self._read_group(self._h5[name], f"table /{name}"), self.path, f"table /{name}")

    def _known(self, name: str) -> pd.DataFrame:
        frame = self.table(name)
        return empty_frame(KNOWN_TABLES[name]) if frame is None else frame

    def verdicts(self) -> pd.DataFrame:
        """/verdicts (`crl eval --h5`): one row per judged candidate."""
        return self._known("verdicts")

    def steps(self) -> pd.DataFrame:
        """/steps (`crl run`): one row per training step. A file written before the telemetry
        columns existed gets them as NaN (not measured)."""
        return with_added_columns("steps", self._known("steps"))

    def rollouts(self) -> pd.DataFrame:
        """/rollouts (`crl run`): one row per evaluated completion."""
        return self._known("rollouts")

    def validation(self) -> pd.DataFrame:
        """/validation (`crl run` with `validation:`): one row per completion of a held-out task."""
        return self._known("validation")

    # --- text stores ---------------------------------------------------------------------------
    def texts(self, store: str, ids=None) -> pd.Series:
        """Text store /text/<store> as a Series id -> text (empty when absent). With `ids`, only those
        ids are read (the rest of the store's texts stay on disk)."""
        check_name("text store", store, self.path)
        if store not in self.text_stores():
            return pd.Series([], dtype=object, name=store, index=pd.Index([], dtype=np.int64, name="id"))
        group = self._h5["text"][store]
        where = f"text store /text/{store}"

        def read():
            if ids is None:
                frame = self._read_group(group, where)
            else:
                id_column = self._read_group_column(group, where, "id")
                wanted = np.flatnonzero(np.isin(id_column, np.asarray(list(ids), dtype=np.int64)))
                frame = self._read_group(group, where, rows=wanted) if len(wanted) else \
                    pd.DataFrame({"id": np.array([], np.int64), "text": np.array([], object)})
            if "id" not in frame or "text" not in frame:
                raise ResultsFileError(f"{self.path}: {where} lacks its id or text column")
            return pd.Series(frame["text"].values, index=pd.Index(frame["id"].values, name="id"), name=store)

        return _retry(read, self.path, where)

    def _read_group_column(self, group, where, name) -> np.ndarray:
        columns = {n: (d, k) for n, d, k in self._checked_columns(group, where)}
        if name not in columns or columns[name][1] != "int64":
            raise ResultsFileError(f"{self.path}: {where} has no int64 column {name!r}")
        count = min(int(d.shape[0]) for d, _ in columns.values())
        return np.asarray(columns[name][0][:count], dtype=np.int64)


def _retry(read, path: str, what: str):
    for attempt in range(READ_ATTEMPTS):
        try:
            return read()
        except ResultsFileError:
            raise
        except (OSError, RuntimeError, KeyError) as e:
            if attempt == READ_ATTEMPTS - 1:
                raise ResultsFileError(f"{path}: cannot read {what} (a damaged file?): {type(e).__name__}: {e}") from None
            time.sleep(0.1 * (attempt + 1))


def open_results(path: str) -> ResultsFile:
    """Opens a results file for reading (validated on open and per table read)."""
    return ResultsFile(path)


@dataclasses.dataclass
class Results:
    """Everything `load` read from one file."""
    path: str
    meta: dict
    verdicts: pd.DataFrame
    steps: pd.DataFrame
    rollouts: pd.DataFrame
    tables: dict          # every table by name (the three above included, and /validation)
    texts: dict           # store -> Series id -> text (empty unless load(..., texts=True))

    @property
    def validation(self) -> pd.DataFrame:
        """/validation: the held-out tasks' completions (never trained on), /rollouts' columns."""
        return self.tables["validation"]

    @property
    def job_config(self):
        """/meta job_config parsed from its JSON (None when absent or not JSON)."""
        try:
            return json.loads(self.meta["job_config"])
        except (KeyError, ValueError, RecursionError):
            return None


def with_added_columns(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The table with the columns crl added to it after files were written without them, as NaN
    where the file lacks them (/steps' telemetry)."""
    if table == "steps":
        for name in STEP_TELEMETRY_COLUMNS:
            if name not in frame:
                frame[name] = np.full(len(frame), np.nan)
    return frame


def load(path: str, texts: bool = False, superseded: bool = False) -> Results:
    """Reads a whole results file; texts=True also reads every text store (can be large).

    Rows a resumed run re-did (`superseded` true in /steps and /rollouts, docs/results-format.md,
    "Restarts") are left out, as `crl report` and the job's exemplar database leave them out: a step
    done twice would count twice. superseded=True keeps them (the column says which they are). The
    tables keep the file's row numbers as their index either way; texts keep every id."""
    with open_results(path) as f:
        tables = {name: with_added_columns(name, f.table(name)) for name in f.tables()}
        for name, columns in KNOWN_TABLES.items():
            tables.setdefault(name, empty_frame(columns))
        if not superseded:
            tables = {name: t[~t["superseded"].astype(bool)] if "superseded" in t.columns else t for name, t in tables.items()}
        return Results(path=str(path), meta=f.meta(), verdicts=tables["verdicts"], steps=tables["steps"],
                       rollouts=tables["rollouts"], tables=tables,
                       texts={s: f.texts(s) for s in f.text_stores()} if texts else {})


def split_status(status: pd.Series) -> tuple[pd.Series, pd.Series]:
    """'hack:aliasing' -> ('hack', 'aliasing'); 'ok' -> ('ok', ''). Vectorised over a Series."""
    parts = status.astype(str).str.split(":", n=1, expand=True)
    kind = parts[0]
    detail = parts[1].fillna("") if parts.shape[1] > 1 else pd.Series([""] * len(status), index=status.index)
    return kind, detail
