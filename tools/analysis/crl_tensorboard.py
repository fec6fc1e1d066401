#!/usr/bin/env python3
"""crl_tensorboard: a run's /steps as TensorBoard curves, also while the job writes results.h5.

    python3 tools/analysis/crl_tensorboard.py runs/x/results.h5 --logdir runs/x/tensorboard --follow
    tensorboard --logdir runs/x/tensorboard        # in another shell (pip install tensorboard)

Reads the file with crl_results (as `crl report` does: a read that overlaps the job's flush is
retried; rows a resume re-did are left out) and writes the event files with tensorboardX's
SummaryWriter (pip install tensorboardX; tools/setup.sh installs it into crl's venv), one scalar
per measured figure and step, global step = the job's step: reward/*, train/* (loss, grad norm,
lr), policy/* (entropy, KL, clip fraction), advantages/*, rollouts/* (lengths, status shares),
time/*. NaN (not measured: docs/results-format.md) is left out, and sft steps have no reward.
--follow polls the file every --interval seconds until interrupted. Each start rewrites the curves
from the file's first step (TensorBoard's purge_step drops what an earlier start wrote), and a step
written again after a resume replaces the old points from that step on.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crl_results  # noqa: E402

# /steps column -> TensorBoard tag.
SCALARS = {
    "reward_mean": "reward/mean", "reward_median": "reward/median", "reward_max": "reward/max",
    "loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr",
    "entropy": "policy/entropy", "kl": "policy/kl", "clip_fraction": "policy/clip_fraction",
    "advantage_mean": "advantages/mean", "advantage_std": "advantages/std",
    "zero_advantage_fraction": "advantages/zero_advantage_groups",
    "completion_tokens_mean": "rollouts/completion_tokens_mean", "completion_tokens_max": "rollouts/completion_tokens_max",
    "seconds_generate": "time/generate", "seconds_evaluate": "time/evaluate", "seconds_train": "time/train",
    "seconds_step": "time/step", "evaluator_busy_fraction": "time/evaluator_busy_fraction",
}
STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "crash", "mismatch", "hack", "format_error",
            "internal_error")
REWARDS = ("reward_mean", "reward_median", "reward_max")


def step_scalars(row) -> dict:
    """The tag -> value pairs of one /steps row that were measured."""
    out = {}
    for column, tag in SCALARS.items():
        if column not in row or (column in REWARDS and row.get("stage") == "sft"):
            continue
        value = float(row[column])
        if math.isfinite(value):
            out[tag] = value
    counts = {s: float(row[f"n_{s}"]) for s in STATUSES if f"n_{s}" in row}
    total = sum(counts.values())
    if total > 0:
        for status, n in counts.items():
            out[f"rollouts/share_{status}"] = n / total
    return out


class Exporter:
    """Writes the rows of /steps it has not written yet; a row whose step it wrote before (a resume
    re-did it) starts a writer that purges the old points from that step on."""

    def __init__(self, logdir: str):
        from tensorboardX import SummaryWriter  # the one writer of the event format here
        self._writer_class = SummaryWriter
        self.logdir = logdir
        self.writer = None
        self.last_step = None
        self.rows_seen = 0

    def _open(self, purge_step: int):
        if self.writer is not None:
            self.writer.close()
        self.writer = self._writer_class(self.logdir, purge_step=purge_step)

    def export(self, path: str) -> int:
        """Writes the file's new steps; returns how many."""
        steps = crl_results.load(path).steps
        if "step" not in steps or steps.empty:
            return 0
        rows = steps.sort_index()
        rows = rows[rows.index >= self.rows_seen]  # the file's row numbers: new rows only
        written = 0
        for index, row in rows.iterrows():
            step = int(row["step"])
            if self.writer is None or (self.last_step is not None and step <= self.last_step):
                self._open(step)
            for tag, value in step_scalars(row).items():
                self.writer.add_scalar(tag, value, global_step=step)
            self.last_step = step
            self.rows_seen = int(index) + 1
            written += 1
        if self.writer is not None:
            self.writer.flush()
        return written

    def close(self):
        if self.writer is not None:
            self.writer.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="the run's results.h5 (a job may be writing it)")
    ap.add_argument("--logdir", required=True, help="the folder for the event files (tensorboard --logdir)")
    ap.add_argument("--follow", action="store_true", help="keep reading new steps until interrupted")
    ap.add_argument("--interval", type=float, default=30.0, help="seconds between reads with --follow (default 30)")
    args = ap.parse_args(argv)
    try:
        exporter = Exporter(args.logdir)
    except ImportError:
        print("crl_tensorboard: tensorboardX is not installed in", sys.executable, "(pip install tensorboardX)",
              file=sys.stderr)
        return 2
    try:
        while True:
            if os.path.exists(args.results):
                try:
                    n = exporter.export(args.results)
                except crl_results.ResultsFileError as e:
                    print(f"crl_tensorboard: {e}", file=sys.stderr)
                    return 3
                if n:
                    print(f"crl_tensorboard: {n} step(s) written to {args.logdir} (last step {exporter.last_step})",
                          flush=True)
            elif not args.follow:
                print(f"crl_tensorboard: {args.results} does not exist", file=sys.stderr)
                return 3
            if not args.follow:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
    finally:
        exporter.close()


if __name__ == "__main__":
    sys.exit(main())
