#!/usr/bin/env python3
"""Per-step figures of `crl report` (tools/analysis/crl_stats.py, crl_results.py; ctest
report_stats, issue 43 row 9): sft steps are not drawn as reward 0; each task's best speedup so
far is carried over steps where it wrote no correct program (an older file's /steps without the
telemetry columns: tests/job/telemetry_test.py).
Usage: report_stats_test.py
"""
import math
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "analysis"))
import crl_stats  # noqa: E402


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def attempt(step, task, status, speedup):
    return {"task": task, "step": step, "status": status, "status_kind": status, "speedup": speedup}


def main():
    steps = pd.DataFrame({"step": [0, 1, 2], "stage": ["sft", "crl", "crl"], "reward_mean": [0.0, 0.5, 0.25],
                          "reward_median": [0.0, 0.5, 0.0], "reward_max": [0.0, 1.0, 1.0]})
    rewarded = crl_stats.rewarded_steps(steps)
    if not math.isnan(rewarded["reward_mean"][0]) or rewarded["reward_mean"][1] != 0.5:
        fail(f"the sft step's reward is drawn: {rewarded['reward_mean'].tolist()}")
    if steps["reward_mean"][0] != 0.0:
        fail("rewarded_steps changed its input")

    # Task a: 2x at step 1, nothing correct at step 2, 1.5x at step 3; task b: 4x at step 2 only.
    attempts = pd.DataFrame([attempt(1, "a", "ok", 2.0), attempt(1, "b", "mismatch", np.nan),
                             attempt(2, "a", "compile_error", np.nan), attempt(2, "b", "ok", 4.0),
                             attempt(3, "a", "ok", 1.5), attempt(3, "b", "mismatch", np.nan),
                             attempt(4, "a", "mismatch", np.nan)])
    over = crl_stats.best_over_steps(attempts).set_index("step")
    if list(over.index) != [1, 2, 3, 4]:
        fail(f"best so far is not given at every step with rollouts: {list(over.index)}")
    expected = {1: (1, 2.0), 2: (2, math.sqrt(8.0)), 3: (2, math.sqrt(8.0)), 4: (2, math.sqrt(8.0))}
    for step, (tasks, geomean) in expected.items():
        row = over.loc[step]
        if row["tasks_correct"] != tasks or abs(row["geomean_best"] - geomean) > 1e-9 or row["max_best"] != 4.0 and step > 1:
            fail(f"step {step}: {row.to_dict()}, expected {tasks} task(s), geomean {geomean}")
    print("PASS: sft steps have no reward on the plot; best so far carried forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
