#!/usr/bin/env python3
"""tools/analysis/cuda_l1_table.py on a release and reports written here (not CUDA-L1's data): statuses
counted, format_error grouped by reason, per-level speedups beside score_default with the median ratio,
lower-precision rows named, rows without code skipped and rows with code but no verdict listed."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "analysis", "cuda_l1_table.py")


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def main():
    release = [
        {"level_id": 1, "task_id": 1, "custom_code": "class ModelNew: pass  # plain fp32", "score_default": 2.0},
        {"level_id": 1, "task_id": 2, "custom_code": "x = a.half()\nclass ModelNew: pass", "score_default": 4.0},
        {"level_id": 1, "task_id": 3, "custom_code": "torch.backends.cuda.matmul.allow_tf32 = True", "score_default": 3.0},
        {"level_id": 2, "task_id": 1, "custom_code": "class ModelNew: pass", "score_default": 1.5},
        {"level_id": 2, "task_id": 2, "custom_code": "None", "score_default": 0},
        {"level_id": 3, "task_id": 1, "custom_code": "class ModelNew: pass", "score_default": 1.2},
    ]
    report = {"lines": [
        {"task": "level1/001_a", "status": "ok", "speedup": 1.0, "message": "speedup 1.000"},
        {"task": "level1/002_b", "status": "ok", "speedup": 3.0, "message": "speedup 3.000"},
        {"task": "level1/003_c", "status": "mismatch", "speedup": 0.0, "message": "output 0: 5 of 9 elements outside\nmore"},
        {"task": "level2/001_d", "status": "format_error", "speedup": 0.0,
         "message": "x.py: ModelNew has 1 parameter (w [3]); task level2/001_d's KernelBench module has 2 (...)"},
    ]}
    with tempfile.TemporaryDirectory() as work:
        release_path, report_path = os.path.join(work, "h100.json"), os.path.join(work, "import.json")
        with open(release_path, "w") as f:
            f.write("\n".join(json.dumps(r) for r in release) + "\n")
        with open(report_path, "w") as f:
            json.dump(report, f)
        r = subprocess.run([sys.executable, SCRIPT, release_path, report_path, "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"exit {r.returncode}: {r.stderr}")
        s = json.loads(r.stdout)
        if (s["rows"], s["with_code"], s["judged"], s["not_judged"]) != (6, 5, 4, ["level3/001"]):
            fail(f"rows, with code, judged, not judged: {s['rows']}, {s['with_code']}, {s['judged']}, {s['not_judged']}")
        if s["statuses"] != {"ok": 2, "mismatch": 1, "format_error": 1}:
            fail(f"statuses {s['statuses']}")
        if s["format_error_reasons"] != {"tensors differ in count from the module's": 1}:
            fail(f"format_error reasons {s['format_error_reasons']}")
        level1 = s["per_level"]["level1"]
        # ok: 1.0 against 2.0 and 3.0 against 4.0: ratios 0.5 and 0.75.
        if level1["ok"] != 2 or abs(level1["crl_mean"] - 2.0) > 1e-12 or abs(level1["median_ratio"] - 0.625) > 1e-12:
            fail(f"level1 {level1}")
        precision = {row["task"]: row["kinds"] for row in s["low_precision"]}
        if precision != {"level1/002_b": ["half"], "level1/003_c": ["tf32"]}:
            fail(f"lower precision rows {precision}")
        if [row["message"] for row in s["rejections"]][0] != "output 0: 5 of 9 elements outside":
            fail(f"a rejection is its message's first line: {s['rejections']}")
        text = subprocess.run([sys.executable, SCRIPT, release_path, report_path], capture_output=True, text=True).stdout
        if "| level1 | 2 | 2.000 |" not in text or "- level2/001_d: format_error:" not in text:
            fail(f"the Markdown table:\n{text}")
    print("cuda_l1_table: counted, grouped and compared as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
