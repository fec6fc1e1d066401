#!/usr/bin/env python3
"""Per-step time split of `crl run` results files (tools/gpu-measure.sh job): for each crl step,
wall time, generate / evaluate / train seconds, generation tokens/s, and each role's idle fraction
of the step (evaluators: 1 - their busy seconds / (evaluators x step wall time); trainers: their
time waiting for verdicts / (trainers x step wall time)), from /steps and /meta (docs/results-format.md).

    tools/bench/job_step_split.py LABEL=results.h5 [LABEL=results.h5 ...] [--out split.json]
"""
import argparse
import json
import sys

import h5py


def split(path):
    with h5py.File(path, "r") as f:
        roles = json.loads(f["meta"].attrs["roles"])
        trainers, evaluators = int(roles["trainers"]), int(roles["evaluators"])
        cols = list(f["steps"].attrs["crl_columns"])
        steps = {c: f["steps"][c].asstr()[:] if f["steps"][c].dtype.kind == "O" else f["steps"][c][:] for c in cols}
    rows = []
    for i in range(len(steps["step"])):
        if steps["superseded"][i] or steps["stage"][i] == "sft":
            continue
        wall = float(steps["seconds_step"][i])
        gen, ev, tr = float(steps["seconds_generate"][i]), float(steps["seconds_evaluate"][i]), float(steps["seconds_train"][i])
        busy = float(steps["evaluator_busy_fraction"][i]) * evaluators * ev
        rows.append({
            "step": int(steps["step"][i]), "stage": str(steps["stage"][i]), "policy_version": int(steps["policy_version"][i]),
            "seconds_step": wall, "seconds_generate": gen, "seconds_evaluate": ev, "seconds_train": tr,
            "tokens_generated": int(steps["tokens_generated"][i]),
            "generate_tokens_per_s": steps["tokens_generated"][i] / gen if gen > 0 else 0.0,
            "evaluator_idle_fraction": max(0.0, 1 - busy / (evaluators * wall)) if wall > 0 and evaluators else 0.0,
            "trainer_idle_fraction": float(steps["trainer_wait_seconds"][i]) / (trainers * wall) if wall > 0 else 0.0,
            "n_ok": int(steps["n_ok"][i]), "n_format_error": int(steps["n_format_error"][i]),
        })
    return {"trainers": trainers, "evaluators": evaluators, "steps": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=results.h5")
    ap.add_argument("--out", help="JSON file to write")
    args = ap.parse_args()
    out = {}
    for item in args.runs:
        label, _, path = item.partition("=")
        if not path:
            ap.error(f"{item}: expected LABEL=results.h5")
        out[label] = split(path)
        print(f"{label} ({path}): {out[label]['trainers']} trainer(s), {out[label]['evaluators']} evaluator(s)")
        print(f"{'step':>5} {'wall s':>8} {'gen s':>8} {'eval s':>8} {'train s':>8} {'gen tok/s':>10} "
              f"{'eval idle':>9} {'train idle':>10} {'ok':>4}")
        for r in out[label]["steps"]:
            print(f"{r['step']:>5} {r['seconds_step']:>8.2f} {r['seconds_generate']:>8.2f} {r['seconds_evaluate']:>8.2f} "
                  f"{r['seconds_train']:>8.2f} {r['generate_tokens_per_s']:>10.0f} {r['evaluator_idle_fraction']:>9.2f} "
                  f"{r['trainer_idle_fraction']:>10.2f} {r['n_ok']:>4}")
        total = sum(r["seconds_step"] for r in out[label]["steps"])
        print(f"total wall time of the crl steps: {total:.2f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
