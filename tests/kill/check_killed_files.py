#!/usr/bin/env python3
"""Reads every results file a kill left (results_kill_test.cpp) with h5py and crl_results.py, as the
analysis and `crl report` read them: each must open, pass crl_results' validation and hold the rows
the C++ reader found.
    check_killed_files.py MANIFEST.json     ([{"file": ..., "rows": N}, ...])
Exit 0: all read; 1: the failures are printed."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "analysis"))

import h5py  # noqa: E402

import crl_results  # noqa: E402


def main(manifest_path):
    with open(manifest_path) as f:
        manifest = json.load(f)
    failures = []
    for entry in manifest:
        try:
            with h5py.File(entry["file"], "r", locking=False) as f:
                f.visit(lambda name: None)  # every object's header is read
            results = crl_results.load(entry["file"], texts=True)
            rows = len(results.tables["rollouts"])
            if rows != entry["rows"]:
                failures.append(f"{entry['file']}: {rows} rollouts rows, the C++ reader found {entry['rows']}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, with its file
            failures.append(f"{entry['file']}: {type(e).__name__}: {e}")
    for failure in failures:
        print(failure)
    print(f"check_killed_files: {len(manifest)} files, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
