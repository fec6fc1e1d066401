#!/usr/bin/env python3
"""atheris harness: crl results files through the analysis Python, as `crl report` reads them
(crl_results.load with every text, then crl_sources' reading of a results file). Like
fuzz_results_file.cpp, the input is a recipe: h5py builds a file whose crl layout is hostile (group
kinds, column lists, dtypes, ranks, lengths, attribute types, names, string bytes), so the fuzzer
explores crl's checks, not HDF5's decoder. Anything but ResultsFileError or InputProblem is a finding.
tools/fuzz.sh runs it with the analysis venv's Python when atheris is installed there
(tools/setup.sh installs it):
    ~/.local/share/crl/venv/bin/python3 tests/fuzz/fuzz_results_py.py -max_total_time=20 tests/fuzz/corpus/fuzz_results_py
"""
import os
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "analysis"))

with atheris.instrument_imports(include=["crl_results", "crl_sources"]):
    import crl_results
    import crl_sources

import h5py  # noqa: E402
import numpy as np  # noqa: E402

NAMES = ["meta", "text", "rollouts", "verdicts", "steps", "id", "text", "task", "status", "speedup", "rollout_id",
         "superseded", "row", "stage", "reward_mean", "x", "1st", "a b", ""]
PATH = os.path.join(tempfile.mkdtemp(prefix="crl_fuzz_results_py_"), "fuzzed.h5")


def name(fdp):
    if fdp.ConsumeBool():
        return fdp.ConsumeUnicodeNoSurrogates(10)
    return NAMES[fdp.ConsumeIntInRange(0, len(NAMES) - 1)]


def attribute(obj, key, fdp, usual):
    choice = fdp.ConsumeIntInRange(0, 4)
    if choice == 0:
        obj.attrs[key] = usual
    elif choice == 1:
        obj.attrs[key] = fdp.ConsumeUnicodeNoSurrogates(40)
    elif choice == 2:
        obj.attrs[key] = np.array([usual, fdp.ConsumeUnicodeNoSurrogates(8)], dtype=h5py.string_dtype())
    elif choice == 3:
        obj.attrs[key] = fdp.ConsumeIntInRange(-2**63, 2**63 - 1)


def column(group, key, fdp):
    rows = fdp.ConsumeIntInRange(0, 6)
    kind = fdp.ConsumeIntInRange(0, 7)
    if kind == 0:
        data = np.array(fdp.ConsumeIntListInRange(rows, -2**63, 2**63 - 1), dtype="<i8")
    elif kind == 1:
        data = np.array([fdp.ConsumeRegularFloat() for _ in range(rows)], dtype="<f8")
    elif kind == 2:
        data = np.array([fdp.ConsumeBool() for _ in range(rows)], dtype=bool)
    elif kind == 3:
        data = np.array([fdp.ConsumeUnicodeNoSurrogates(30) for _ in range(rows)], dtype=h5py.string_dtype())
    elif kind == 4:
        data = np.array([fdp.ConsumeBytes(4) for _ in range(rows)], dtype="S4")
    elif kind == 5:
        data = np.array(fdp.ConsumeIntListInRange(rows, -2**31, 2**31 - 1), dtype="<i4")
    elif kind == 6:
        data = np.zeros((rows, 2), dtype="<i8")
    else:
        data = np.array([fdp.ConsumeUnicodeNoSurrogates(6) for _ in range(rows)], dtype=object)
        data = data.astype(h5py.string_dtype())
    try:
        group.create_dataset(key, data=data, maxshape=(None,) + data.shape[1:], chunks=True)
    except (ValueError, TypeError, KeyError, OSError, RuntimeError):
        pass  # a name h5py refuses: the recipe goes on without it


def table(parent, key, kind, fdp):
    try:
        group = parent.create_group(key)
    except (ValueError, KeyError, OSError, RuntimeError):
        return
    attribute(group, "crl_kind", fdp, kind)
    names = [name(fdp) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 0:
        group.attrs["crl_columns"] = np.array(names, dtype=h5py.string_dtype())
    elif choice == 1:
        group.attrs["crl_columns"] = ",".join(names)
    elif choice == 2:
        group.attrs["crl_columns"] = len(names)
    for n in names:
        column(group, n, fdp)
    if fdp.ConsumeBool():
        column(group, name(fdp), fdp)


def build(fdp):
    with h5py.File(PATH, "w") as f:
        attribute(f, "crl_format", fdp, "crl-results")
        if fdp.ConsumeIntInRange(0, 3):
            f.attrs["crl_format_version"] = 1 if fdp.ConsumeBool() else fdp.ConsumeIntInRange(-2**63, 2**63 - 1)
        else:
            attribute(f, "crl_format_version", fdp, "1")
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            key = name(fdp)
            if key == "meta":
                if "meta" in f:
                    continue
                meta = f.create_group("meta")
                for _ in range(fdp.ConsumeIntInRange(0, 4)):
                    attribute(meta, name(fdp) if fdp.ConsumeBool() else "gpu_names", fdp, '["H100"]')
            elif key == "text" and fdp.ConsumeBool() and "text" not in f:
                text = f.create_group("text")
                for _ in range(fdp.ConsumeIntInRange(0, 3)):
                    table(text, "programs" if fdp.ConsumeBool() else name(fdp), "text", fdp)
            elif fdp.ConsumeIntInRange(0, 9) == 0:
                column(f, key, fdp)
            else:
                table(f, key, "table", fdp)


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    try:
        build(fdp)
    except (ValueError, TypeError, KeyError, OSError, RuntimeError):
        return  # h5py refused the recipe (an empty attribute name, say): nothing to read
    try:
        crl_results.load(PATH, texts=True)
        crl_sources._load_h5(PATH, "fuzzed")  # noqa: SLF001 - what `crl report` does with a results file
    except (crl_results.ResultsFileError, crl_sources.InputProblem):
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
