#!/usr/bin/env python3
"""Reads a crl results file (HDF5) with nothing but h5py and numpy: proof that anyone can.

    read_results.py RUN.h5                 summary: /meta, tables (rows, column types), text stores
    read_results.py RUN.h5 --json          everything (meta, every table's rows, every text) as JSON
    read_results.py RUN.h5 --table steps   one table as CSV on stdout

In a notebook: `from read_results import read_table; df = pandas.DataFrame(read_table(path, "steps"))`.
The layout is described in docs/results-format.md.
"""
import argparse
import csv
import json
import math
import sys

import h5py
import numpy as np


def _check_format(f, path):
    if f.attrs.get("crl_format") != "crl-results":
        sys.exit(f"{path}: not a crl results file (no crl_format='crl-results' on /)")


def column_type(dataset):
    """'int64', 'float64', 'bool' or 'string', as crl names them."""
    if h5py.check_string_dtype(dataset.dtype) is not None:
        return "string"
    if dataset.dtype == np.bool_:
        return "bool"
    return str(dataset.dtype)


def _columns(group):
    return [str(name) for name in group.attrs["crl_columns"]]


def _rows(group):
    return min(group[name].shape[0] for name in _columns(group))


def read_group_columns(group):
    """Column name -> numpy array (strings as Python str), all cut to the rows every column has."""
    rows = _rows(group)
    out = {}
    for name in _columns(group):
        dataset = group[name]
        if column_type(dataset) == "string":
            out[name] = dataset.asstr()[:rows]
        else:
            out[name] = dataset[:rows]
    return out


def read_table(path, table):
    with h5py.File(path, "r", locking=False) as f:
        _check_format(f, path)
        return read_group_columns(f[table])


def tables(f):
    return sorted(k for k, v in f.items() if isinstance(v, h5py.Group) and v.attrs.get("crl_kind") == "table")


def text_stores(f):
    if "text" not in f:
        return []
    return sorted(k for k, v in f["text"].items() if v.attrs.get("crl_kind") == "text")


def _json_value(value):
    """Plain JSON for numpy scalars; non-finite floats become the strings 'nan', 'inf', '-inf'."""
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    return value


def dump(path):
    with h5py.File(path, "r", locking=False) as f:
        _check_format(f, path)
        out = {
            "format_version": int(f.attrs["crl_format_version"]),
            "meta": {k: str(v) for k, v in f["meta"].attrs.items()} if "meta" in f else {},
            "tables": {},
            "text": {},
        }
        for name in tables(f):
            group = f[name]
            data = read_group_columns(group)
            out["tables"][name] = {
                "columns": {c: column_type(group[c]) for c in _columns(group)},
                "rows": _rows(group),
                "data": {c: [_json_value(v) for v in values] for c, values in data.items()},
            }
        for store in text_stores(f):
            data = read_group_columns(f["text"][store])
            out["text"][store] = {str(int(i)): t for i, t in zip(data["id"], data["text"])}
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--json", action="store_true", help="print everything as one JSON document")
    parser.add_argument("--table", help="print this table as CSV")
    args = parser.parse_args()
    if args.json:
        json.dump(dump(args.path), sys.stdout, ensure_ascii=False)
        print()
    elif args.table:
        data = read_table(args.path, args.table)
        writer = csv.writer(sys.stdout)
        writer.writerow(data.keys())
        writer.writerows(zip(*(list(map(_json_value, v)) for v in data.values())))
    else:
        content = dump(args.path)
        print(f"{args.path}: crl results format {content['format_version']}")
        for key, value in content["meta"].items():
            print(f"  meta {key} = {value[:100]}")
        for name, table in content["tables"].items():
            columns = ", ".join(f"{c}:{t}" for c, t in table["columns"].items())
            print(f"  table {name}: {table['rows']} rows ({columns})")
        for store, texts in content["text"].items():
            print(f"  text {store}: {len(texts)} texts")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # `read_results.py ... | head` is fine
        sys.stderr.close()
