#!/usr/bin/env python3
"""The suite's tasks timed as KernelBench times its PyTorch modules, to compare with crl's references.

For each task of jobs/suite, loads KernelBench's module for the same problem (level and number) from
a KernelBench checkout, builds it from its get_init_inputs() directly on the device, makes inputs of
the task's shapes at --scale from the crl spec (dtype and init kind as the spec says), and times
forward as KernelBench's cuda_event timer does: training mode (no .eval()), under torch.no_grad(),
float32 with TF32 off for matmuls and convolutions, a 256 MiB write to flush L2 before each call,
CUDA events around the call, a device synchronise after it, the first timed call discarded. The
number of timed calls adapts to the task: as many as fit in --budget seconds, between
--min-trials and --max-trials (KernelBench uses 100), so that the 250 tasks take ~6 minutes on
an H200. The median is the task's time. On the CPU (for tests) the clock is time.perf_counter
and there is no L2 flush.

Writes JSON in the layout of `crl tasks check --out` (results/baselines/level{1,2,3}_full_h200.json):
backend, device, scale, torch_version, seconds, tasks, failures, and per task id, category, status
("ok" or "error" with a message), times_ms, median_ms, output_shapes, output_dtypes, flops, bytes,
gflops_per_s, gbytes_per_s; plus the KernelBench file, the trial count and whether KernelBench's
get_inputs() (evaluated on the meta device, so nothing is allocated) has the same shapes.

KernelBench is not part of crl: point --kernelbench at a checkout of
ScalingIntelligence/KernelBench (its root or its KernelBench/ folder; crl's suite follows
commit 423217d). Its level-3 Mamba2 modules (048, 049) import einops: on a machine without the
network, `pip download einops==0.8.2 --no-deps -d .whl` beforehand, carry .whl, and
`pip install --no-index .whl/einops-*.whl` there.

On the GPU machine (the 250 tasks, ~6 minutes), then the comparison with crl's baselines:
  python3 tools/bench/eager_suite.py run --kernelbench .carry/KernelBench --out $OUT/eager_full_h200.json
  python3 tools/bench/eager_suite.py compare $OUT/eager_full_h200.json results/baselines/level*_full_h200.json
Some tasks (ids, or whole levels, or a range of ids):
  python3 tools/bench/eager_suite.py run --kernelbench DIR --task level2/028 --task level2/029 --out f.json
  python3 tools/bench/eager_suite.py run --kernelbench DIR --level 1 --from level1/030 --to level1/060 --out f.json
"""
import argparse
import ast
import glob
import importlib.util
import json
import os
import re
import statistics
import sys
import time

import yaml

torch = None  # imported by `run` only, so that `compare` starts at once (see main)

SUITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs", "suite")
DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "bool")  # the format's, as torch names them
L2_FLUSH_BYTES = 256 << 20  # KernelBench's clear_l2_cache: more than any GPU's L2 (H200: 60 MiB)


class SpecError(Exception):
    pass


# --- the crl spec: the `// crl:spec` section of a reference, and its expressions -----------------

def read_spec(path):
    lines, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.rstrip("\n") == "// crl:spec":
                inside = True
                continue
            if inside and line.startswith("// crl:"):
                break
            if inside:
                lines.append(line)
    if not lines:
        raise SpecError(f"{path}: no '// crl:spec' section")
    return yaml.safe_load("".join(lines))


def evaluate(expr, variables):
    """A spec expression (docs/program-format.md): numbers, + - * / // %, parentheses, unary minus."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in variables:
                raise SpecError(f"expression '{expr}': unknown variable '{node.id}'")
            return variables[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b,
                   ast.Div: lambda: a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0 else a / b}
            if type(node.op) in ops:
                return ops[type(node.op)]()
        raise SpecError(f"expression '{expr}' is not a spec expression")
    return walk(ast.parse(str(expr), mode="eval"))


def shape_at(tensor, variables):
    shape = []
    for dim in tensor["shape"]:
        v = evaluate(dim, variables)
        if v != int(v):
            raise SpecError(f"tensor '{tensor['name']}': dimension '{dim}' is not whole")
        shape.append(int(v))
    return shape


def init_call(text):
    m = re.fullmatch(r"\s*([a-z_]+)\s*(?:\((.*)\))?\s*", str(text))
    if not m:
        raise SpecError(f"init '{text}' is not one the format knows")
    args = [a for a in (m.group(2) or "").split(",") if a.strip()]
    return m.group(1), args


def make_input(tensor, variables, device, generator):
    """One input with the spec's shape and dtype, drawn like the spec's init (values do not change the
    timing of these operations; post ops are not applied, but abs, which keeps logs and roots finite)."""
    if tensor["dtype"] not in DTYPES:
        raise SpecError(f"tensor '{tensor['name']}': dtype '{tensor['dtype']}' is not one the format knows")
    shape, dtype = shape_at(tensor, variables), getattr(torch, tensor["dtype"])
    kind, args = init_call(tensor.get("init", "randn"))
    a = [evaluate(x, variables) for x in args]
    opts = dict(device=device, dtype=dtype)
    if kind == "randn":
        t = torch.randn(shape, generator=generator, **opts)
    elif kind == "rand":
        t = torch.rand(shape, generator=generator, **opts)
    elif kind == "uniform":
        t = torch.empty(shape, **opts).uniform_(a[0], a[1], generator=generator)
    elif kind == "normal":
        t = torch.empty(shape, **opts).normal_(a[0], a[1], generator=generator)
    elif kind == "uniform_fan_in":
        bound = 1.0 / a[0] ** 0.5
        t = torch.empty(shape, **opts).uniform_(-bound, bound, generator=generator)
    elif kind == "randint":
        t = torch.randint(int(a[0]), int(a[1]), shape, generator=generator, **opts)
    elif kind == "ones":
        t = torch.ones(shape, **opts)
    elif kind == "zeros":
        t = torch.zeros(shape, **opts)
    elif kind == "full":
        t = torch.full(shape, a[0], **opts)
    else:
        raise SpecError(f"init '{kind}' is not one the format knows")
    if "abs" in [str(p).strip() for p in tensor.get("post", [])]:
        t = t.abs()
    return t


# --- the suite and KernelBench's files ---------------------------------------------------------------

def suite_tasks(suite_dir):
    tasks = []
    for path in sorted(glob.glob(os.path.join(suite_dir, "level*", "*.crl"))):
        level = os.path.basename(os.path.dirname(path))
        tasks.append((f"{level}/{os.path.basename(path)[:-4]}", path))
    return tasks


def select(tasks, ids, level, first, last):
    chosen = []
    for task_id, path in tasks:
        if ids and not any(task_id == i or task_id.startswith(i + "_") for i in ids):
            continue
        if level is not None and not task_id.startswith(f"level{level}/"):
            continue
        if first and task_id < first:
            continue
        if last and task_id[:len(last)] > last:
            continue
        chosen.append((task_id, path))
    missing = [i for i in ids if not any(t == i or t.startswith(i + "_") for t, _ in chosen)]
    if missing:
        raise SpecError(f"no task matches {', '.join(missing)} in the suite")
    return chosen


def spec_tool_tasks(parser):
    """The shared start of the tools that write spec keys from KernelBench (tools/suite/add_*.py):
    adds --kernelbench, --suite, --task and --check to `parser`, parses, imports torch (and a stand-in
    for einops, which only Mamba2's modules use, where it is not installed) and returns
    (args, the selected (task id, path) pairs)."""
    global torch
    parser.add_argument("--kernelbench", required=True, help="a KernelBench checkout (root or its KernelBench/ folder)")
    parser.add_argument("--suite", default=SUITE_DIR, help="the crl suite folder (default: this tree's)")
    parser.add_argument("--task", action="append", help="only these task ids (or prefixes); repeatable")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where a spec differs")
    args = parser.parse_args()
    import torch as torch_module
    torch = torch_module
    if "einops" not in sys.modules:
        try:
            import einops  # noqa: F401
        except ImportError:
            import types
            sys.modules["einops"] = types.SimpleNamespace(rearrange=None, einsum=None, repeat=None)
    tasks = suite_tasks(args.suite)
    if args.task:
        tasks = select(tasks, args.task, None, None, None)
    return args, tasks


def kernelbench_file(root, task_id):
    level, name = task_id.split("/")
    number = int(name.split("_")[0])
    for base in (os.path.join(root, "KernelBench"), root):
        found = glob.glob(os.path.join(base, level, f"{number}_*.py"))
        if len(found) == 1:
            return found[0]
    raise SpecError(f"no KernelBench file {level}/{number}_*.py under {root}")


def load_module(path):
    spec = importlib.util.spec_from_file_location(f"kernelbench_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernelbench_inputs(module):
    """KernelBench's get_inputs(), evaluated on the meta device (nothing allocated); None when it cannot."""
    try:
        with torch.device("meta"):
            return list(module.get_inputs())
    except Exception:  # a get_inputs that the meta device cannot run: shapes unknown
        return None


def forward_arguments(kb_inputs, crl_inputs):
    """forward's arguments: crl's tensors in order, and KernelBench's non-tensor inputs (level1/005's
    Python scalar, which crl makes a host constant) in their places."""
    if kb_inputs is None:
        return list(crl_inputs)
    tensors, out = iter(crl_inputs), []
    for x in kb_inputs:
        out.append(next(tensors, None) if isinstance(x, torch.Tensor) else x)
    return out + list(tensors)


def scale_module(module, variables):
    """At a scale other than full, sets KernelBench's module-level sizes that the crl scale also names
    (batch_size, in_channels, ...) to the scale's values, so get_init_inputs() builds the scaled model."""
    changed = []
    for name, value in variables.items():
        if isinstance(getattr(module, name, None), int) and getattr(module, name) != value:
            setattr(module, name, value)
            changed.append(name)
    return changed


# --- timing as KernelBench's cuda_event timer ---------------------------------------------------------

class Timer:
    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush_buffer = torch.empty(L2_FLUSH_BYTES // 8, dtype=torch.int64, device=device) if self.cuda else None

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time_call(self, fn):
        """Milliseconds of one call, cold L2, as KernelBench's time_execution_with_cuda_event."""
        self.sync()
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush_buffer.fill_(42)
        start.record()
        fn()
        end.record()
        self.sync()
        return start.elapsed_time(end)


def describe_outputs(out):
    outs = out if isinstance(out, (tuple, list)) else [out]
    shapes = [list(o.shape) for o in outs if isinstance(o, torch.Tensor)]
    dtypes = [str(o.dtype).replace("torch.", "") for o in outs if isinstance(o, torch.Tensor)]
    return shapes, dtypes


def time_task(task_id, path, args, device, timer):
    spec = read_spec(path)
    result = {"id": task_id, "category": spec.get("category", ""), "status": "error", "message": "",
              "times_ms": [], "median_ms": 0.0, "output_shapes": [], "output_dtypes": []}
    variables = dict(spec["scales"][args.scale])
    result["flops"] = float(evaluate(spec["flops"], variables))
    result["bytes"] = float(evaluate(spec["bytes"], variables))
    kb_path = kernelbench_file(args.kernelbench, task_id)
    result["kernelbench_file"] = os.path.relpath(kb_path, args.kernelbench)
    module = load_module(kb_path)
    kb_inputs = kernelbench_inputs(module)  # before scale_module: KernelBench's own (full) shapes
    if args.scale != "full":
        result["kernelbench_sizes_scaled"] = scale_module(module, variables)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    crl_inputs = [make_input(t, variables, device, generator) for t in spec["inputs"]]
    # Whether KernelBench's get_inputs() has the task's shapes and dtypes (false at a small scale).
    describe = lambda xs: [(list(x.shape), str(x.dtype)) for x in xs if isinstance(x, torch.Tensor)]  # noqa: E731
    result["kernelbench_shapes_match"] = None if kb_inputs is None else describe(kb_inputs) == describe(crl_inputs)
    inputs = forward_arguments(kb_inputs, crl_inputs)
    torch.manual_seed(args.seed)
    with torch.device(device):  # weights made on the device: no host init of large layers
        model = module.Model(*module.get_init_inputs())
    model = model.to(device)  # training mode, as KernelBench leaves it
    with torch.no_grad():
        call = lambda: model(*inputs)  # noqa: E731
        for _ in range(args.warmup):
            out = call()
            timer.sync()
        shapes, dtypes = describe_outputs(out)
        del out
        result["output_shapes"], result["output_dtypes"] = shapes, dtypes
        first = timer.time_call(call)  # discarded, as KernelBench's discard_first; sizes the trial count
        trials = int(min(args.max_trials, max(args.min_trials, args.budget * 1e3 / max(first, 1e-3))))
        times = [timer.time_call(call) for _ in range(trials)]
    result["trials"], result["warmup"] = trials, args.warmup
    result["times_ms"] = times
    result["median_ms"] = statistics.median(times)
    seconds = result["median_ms"] * 1e-3
    result["gflops_per_s"] = result["flops"] / seconds / 1e9 if seconds > 0 else 0.0
    result["gbytes_per_s"] = result["bytes"] / seconds / 1e9 if seconds > 0 else 0.0
    result["status"] = "ok"
    del model, inputs
    return result


def run(args):
    device = torch.device(args.device)
    # Full float32, as crl's references run (lib/program/run_settings.h), and KernelBench's modules
    # in their default (training) mode.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    tasks = select(suite_tasks(args.suite), args.task or [], args.level, args.first, args.last)
    timer = Timer(device)
    report = {"backend": device.type, "scale": args.scale, "torch_version": torch.__version__.split("+")[0],
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "timer": "pytorch eager, KernelBench's cuda_event method (L2 flushed, median)",
              "tf32": False, "results": []}
    start = time.perf_counter()
    for n, (task_id, path) in enumerate(tasks, 1):
        t0 = time.perf_counter()
        try:
            result = time_task(task_id, path, args, device, timer)
        except Exception as e:  # a task that fails is reported, the others still run
            result = {"id": task_id, "status": "error", "message": f"{type(e).__name__}: {e}"[:2000],
                      "times_ms": [], "median_ms": 0.0}
        report["results"].append(result)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"[{n}/{len(tasks)}] {task_id} {result['status']} "
              f"{result['median_ms']:.4g} ms ({result.get('trials', 0)} calls) {time.perf_counter() - t0:.1f} s"
              + (f": {result['message']}" if result["status"] != "ok" else ""), file=sys.stderr, flush=True)
    report["seconds"] = time.perf_counter() - start
    report["tasks"] = len(tasks)
    report["failures"] = sum(r["status"] != "ok" for r in report["results"])
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    print(f"{len(tasks)} tasks, {report['failures']} failed, {report['seconds']:.0f} s: {args.out}", file=sys.stderr)
    return 1 if report["failures"] else 0


# --- crl's times against eager ------------------------------------------------------------------------

def compare(args):
    with open(args.eager, encoding="utf-8") as f:
        eager = {r["id"]: r for r in json.load(f)["results"] if r["status"] == "ok"}
    crl = {}
    for path in args.baselines:
        with open(path, encoding="utf-8") as f:
            crl.update({r["id"]: r for r in json.load(f)["results"] if r["status"] == "ok"})
    rows = []
    for task_id in sorted(set(eager) & set(crl)):
        ratio = crl[task_id]["median_ms"] / eager[task_id]["median_ms"]
        rows.append({"id": task_id, "crl_ms": crl[task_id]["median_ms"], "eager_ms": eager[task_id]["median_ms"],
                     "crl_over_eager": ratio})
    levels = {}
    for r in rows:
        levels.setdefault(r["id"].split("/")[0], []).append(r["crl_over_eager"])
    within = [r for r in rows if 1 / args.threshold <= r["crl_over_eager"] <= args.threshold]
    summary = {"tasks": len(rows), "within": len(within), "threshold": args.threshold,
               "median_ratio_per_level": {k: statistics.median(v) for k, v in sorted(levels.items())},
               "outliers": [r for r in rows if r not in within], "rows": rows}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{len(within)} of {len(rows)} tasks within {args.threshold}x of PyTorch eager (crl / eager)")
        for level, ratio in summary["median_ratio_per_level"].items():
            print(f"  {level}: median ratio {ratio:.3f}")
        for r in summary["outliers"]:
            print(f"  {r['id']}: crl {r['crl_ms']:.4g} ms, eager {r['eager_ms']:.4g} ms, ratio {r['crl_over_eager']:.2f}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="time the tasks' PyTorch modules")
    r.add_argument("--kernelbench", required=True, help="a KernelBench checkout (root or its KernelBench/ folder)")
    r.add_argument("--suite", default=SUITE_DIR, help="the crl suite folder (default: this tree's jobs/suite)")
    r.add_argument("--task", action="append", help="a task id or its prefix (level1/019); repeatable")
    r.add_argument("--level", type=int, help="only this level")
    r.add_argument("--from", dest="first", help="the first task id of a range (inclusive)")
    r.add_argument("--to", dest="last", help="the last task id (or its prefix) of a range (inclusive)")
    r.add_argument("--scale", default="full", help="the spec scale whose shapes are used (default full)")
    r.add_argument("--device", help="cuda or cpu (default: cuda when there is a GPU)")
    r.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    r.add_argument("--budget", type=float, default=0.8, help="seconds of timed calls per task (default 0.8)")
    r.add_argument("--min-trials", type=int, default=5)
    r.add_argument("--max-trials", type=int, default=100)
    r.add_argument("--seed", type=int, default=42)
    r.add_argument("--out", required=True, help="the JSON file to write")
    c = sub.add_parser("compare", help="crl's reference times against an eager run, per task and level")
    c.add_argument("eager", help="a JSON file written by `run`")
    c.add_argument("baselines", nargs="+", help="`crl tasks check --out` files (results/baselines/level*_full_h200.json)")
    c.add_argument("--threshold", type=float, default=1.5)
    c.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        if args.command == "compare":
            return compare(args)
        global torch
        import torch as torch_module
        torch = torch_module
        args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        return run(args)
    except (SpecError, OSError, yaml.YAMLError) as e:
        print(f"eager_suite: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
