#!/usr/bin/env python3
"""Writes (or checks) each suite task's `kernelbench_params:`, which crl param each of its KernelBench module's tensors is.

For every task of jobs/suite, builds KernelBench's `Model(*init_args)` (the spec's own `init_args`, evaluated
at each scale; on the meta device, nothing allocated) and lists its tensors as KernelBench declares them:
`named_parameters()` in order, then `named_buffers()` in order. Each tensor is matched to one of the spec's
`params` (docs/program-format.md, `kernelbench_params`):
  1. parameters, in order, to an unused crl param of the same dtype and the same shape at every scale the
     module was built at; where several qualify, the name decides (the qualified name with '.' as '_', then
     the same name after KERNELBENCH_ALIASES, then the same last word: weight, bias), then the spec's order;
  2. a parameter left over, to a crl param left over whose name matches and whose shape is the tensor's with
     two dimensions swapped (`transpose(a, b)`) or has the same element count (`reshape`) at every scale;
  3. buffers, only to a crl param of the same name (a buffer is usually state the module makes itself).
A tensor left without a param needs a reason (UNMATCHED_BUFFERS, UNMATCHED); a crl param left without a
tensor needs one too (CRL_ONLY); a task that has neither is refused, naming the tensors. The shapes are
written as expressions of the scale variables: a matched tensor's from its param (dims swapped where
transposed), another's from a tensor of the same module with the same shape (a BatchNorm's running
statistics take its weight's), else per dimension a literal where the size is the same at every scale the
module was built at, a scale variable with the same sizes, or a dimension of a param with the same sizes.

The block goes at the end of the spec section, replacing one already there; `--check` writes nothing and
exits 1 where a spec differs. It reads the specs' `init_args`, so run tools/suite/add_init_args.py first.
Level 3's models whose small scale narrows what their constructor fixes in code (add_init_args.py's
NARROWED_IN_CODE) are built at `full` only.

KernelBench is not part of crl: point --kernelbench at a checkout of ScalingIntelligence/KernelBench
(commit 423217d; its root or its KernelBench/ folder).
  python3 tools/suite/add_kernelbench_params.py --kernelbench .carry/KernelBench            # rewrite the specs
  python3 tools/suite/add_kernelbench_params.py --kernelbench .carry/KernelBench --check    # exit 1 on a difference
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import add_init_args  # noqa: E402  (init_args as the spec writes them, the tasks built at full scale only)
import eager_suite  # noqa: E402  (the spec reader, the expression evaluator, KernelBench's file per task)
from eager_suite import SpecError, evaluate, kernelbench_file, read_spec, shape_at, suite_tasks  # noqa: E402

KEY = "kernelbench_params"

# Module names KernelBench's level-2 classes use where crl's specs name the layer by its kind.
KERNELBENCH_ALIASES = [("conv_transpose", "conv"), ("gemm", "linear"), ("matmul", "linear"), ("fc", "linear"),
                       ("groupnorm", "gn"), ("group_norm", "gn"), ("batch_norm", "bn")]

# Buffers no crl param holds, by their last name (any task), and why.
UNMATCHED_BUFFERS = {
    "running_mean": "BatchNorm running statistic, unused in training mode",
    "running_var": "BatchNorm running statistic, unused in training mode",
    "num_batches_tracked": "BatchNorm call counter, read by no output",
}
# Tensors no crl param holds, per task (the tensor's qualified name, or a pattern of it), and why.
UNMATCHED = {
    "level2/026_conv_transpose3d_add_hardswish": {"bias": "forward never reads it"},
    "level3/030_swin_transformer_v2": {
        "*.relative_coords_table": "constant table made in __init__; the reference makes its own",
        "*.relative_position_index": "constant table made in __init__; the reference makes its own",
        "*.attn_mask": "shifted-window mask made in __init__; the reference makes its own",
    },
    "level3/043_min_gpt_causal_attention": {"bias": "causal mask made in __init__; the reference makes its own"},
    "level3/044_mini_gpt_block": {"attn.bias": "causal mask made in __init__; the reference makes its own"},
    "level3/050_relu_self_attention": {"bias": "causal mask made in __init__; the reference makes its own"},
}
# crl params that no tensor of KernelBench's module holds, per task, and why (none in the suite today).
CRL_ONLY = {}


class MatchError(Exception):
    pass


class Tensor:
    """One tensor of KernelBench's module: its sizes at each scale it was built at, and what it became."""

    def __init__(self, name, buffer, dtype):
        self.name, self.buffer, self.dtype = name, buffer, dtype
        self.sizes = {}        # scale -> [int]
        self.param = None      # the crl param's index
        self.transform = None  # None, "reshape" or (a, b)
        self.shape = None      # the spec's expressions
        self.unmatched = None  # why no param holds it


# --- KernelBench's module, built at the spec's scales -----------------------------------------------

def module_tensors(module, values):
    """(parameters, buffers) of Model(*values), each [(name, sizes, dtype name)], in declaration order."""
    import torch
    try:
        with torch.device("meta"):
            model = module.Model(*values)
    except RuntimeError:
        model = module.Model(*values)  # Swin's constructor reads values (.item())
    listed = lambda items: [(n, list(t.shape), str(t.dtype).replace("torch.", "")) for n, t in items]
    return listed(model.named_parameters()), listed(model.named_buffers())


def built_scales(task_id, spec):
    return ["full"] if task_id in add_init_args.NARROWED_IN_CODE else list(spec["scales"])


def kernelbench_tensors(task_id, spec, module):
    """KernelBench's tensors with their sizes at every scale the module is built at."""
    if "init_args" not in spec:
        raise MatchError(f"{task_id}: the spec has no init_args (tools/suite/add_init_args.py writes them)")
    args = [add_init_args.parse_arg(a) for a in spec["init_args"]]
    tensors = None
    for scale in built_scales(task_id, spec):
        values = [add_init_args.evaluate_arg(a, spec["scales"][scale]) for a in args]
        try:
            parameters, buffers = module_tensors(module, values)
        except Exception as e:
            raise MatchError(f"{task_id}: the module does not build at scale '{scale}': {type(e).__name__}: {e}")
        listed = [(n, s, d, False) for n, s, d in parameters] + [(n, s, d, True) for n, s, d in buffers]
        if tensors is None:
            tensors = [Tensor(n, b, d) for n, _, d, b in listed]
        if [(t.name, t.buffer) for t in tensors] != [(n, b) for n, _, _, b in listed]:
            raise MatchError(f"{task_id}: the module's tensors at scale '{scale}' are not those at the first scale")
        for t, (_, sizes, _, _) in zip(tensors, listed):
            t.sizes[scale] = sizes
    return tensors


# --- matching them to the spec's params -----------------------------------------------------------------

def spaced(name):
    return name.replace(".", "_")


def aliased(name):
    name = spaced(name)
    for kernelbench, crl in KERNELBENCH_ALIASES:
        name = re.sub(rf"(^|_){kernelbench}(_|$)", rf"\g<1>{crl}\g<2>", name)
    return name


def name_score(kernelbench, crl):
    if spaced(kernelbench) == crl:
        return 3
    if aliased(kernelbench) == crl:
        return 2
    return 1 if spaced(kernelbench).split("_")[-1] == crl.split("_")[-1] else 0


class Params:
    """The spec's params: name, dtype and sizes at each scale."""

    def __init__(self, spec):
        self.entries = spec.get("params") or []
        self.sizes = [{s: shape_at(p, v) for s, v in spec["scales"].items()} for p in self.entries]
        self.used = [False] * len(self.entries)

    def name(self, i):
        return self.entries[i]["name"]


def best(tensor, candidates, params, ties, minimum=0):
    """The candidate whose name is closest to the tensor's (the spec's order breaks ties), or None."""
    scored = [(name_score(tensor.name, params.name(i)), -i, i) for i in candidates]
    scored = [s for s in scored if s[0] >= minimum]
    if not scored:
        return None
    scored.sort(reverse=True)
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        ties.append(f"{tensor.name} -> {params.name(scored[0][2])} (also {params.name(scored[1][2])})")
    return scored[0][2]


def swapped(sizes, a, b):
    out = list(sizes)
    out[a], out[b] = out[b], out[a]
    return out


def transform_between(tensor, sizes):
    """How the param of `sizes` (scale -> [int]) becomes the tensor: (a, b), "reshape" or None."""
    first = next(iter(tensor.sizes))
    rank = len(tensor.sizes[first])
    if all(len(sizes[s]) == rank for s in tensor.sizes):
        for a in range(rank):
            for b in range(a + 1, rank):
                if all(swapped(sizes[s], a, b) == tensor.sizes[s] for s in tensor.sizes):
                    return (a, b)
    if all(element_count(sizes[s]) == element_count(tensor.sizes[s]) for s in tensor.sizes):
        return "reshape"
    return None


def element_count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def match(task_id, tensors, params):
    """Gives each tensor its param (or its reason for none); returns the name ties the name decided."""
    ties = []
    dtype_of = lambda i: params.entries[i]["dtype"]
    same = lambda t, i: dtype_of(i) == t.dtype and all(params.sizes[i][s] == t.sizes[s] for s in t.sizes)
    for t in (t for t in tensors if not t.buffer):
        i = best(t, [i for i in range(len(params.entries)) if not params.used[i] and same(t, i)], params, ties)
        if i is not None:
            t.param, params.used[i] = i, True
    for t in (t for t in tensors if not t.buffer and t.param is None):
        free = [i for i in range(len(params.entries)) if not params.used[i] and dtype_of(i) == t.dtype]
        i = best(t, free, params, ties, minimum=2)
        transform = transform_between(t, params.sizes[i]) if i is not None else None
        if transform is not None:
            t.param, t.transform, params.used[i] = i, transform, True
    for t in (t for t in tensors if t.buffer):
        named = [i for i in range(len(params.entries)) if not params.used[i] and params.name(i) == spaced(t.name)]
        if named and same(t, named[0]):
            t.param, params.used[named[0]] = named[0], True
    reasons = UNMATCHED.get(task_id, {})
    for t in (t for t in tensors if t.param is None):
        t.unmatched = next((why for pattern, why in reasons.items() if re.fullmatch(
            re.escape(pattern).replace(r"\*", ".*"), t.name)), None)
        if t.unmatched is None and t.buffer:
            t.unmatched = UNMATCHED_BUFFERS.get(t.name.split(".")[-1])
    problems = [f"KernelBench's {'buffer' if t.buffer else 'parameter'} '{t.name}' {next(iter(t.sizes.values()))}"
                for t in tensors if t.param is None and t.unmatched is None]
    crl_only = CRL_ONLY.get(task_id, {})
    problems += [f"the spec's param '{params.name(i)}' {params.sizes[i].get('full')}" for i in range(len(params.entries))
                 if not params.used[i] and params.name(i) not in crl_only]
    problems += [f"CRL_ONLY names '{n}', which a tensor holds or the spec lacks" for n in crl_only
                 if n not in [params.name(i) for i in range(len(params.entries)) if not params.used[i]]]
    if problems:
        raise MatchError(f"{task_id}: matched to nothing and without a reason: " + "; ".join(problems))
    return ties


# --- shapes as expressions ------------------------------------------------------------------------------

def dimension_expression(values, spec, params):
    """An expression of the scale variables with `values` (scale -> int) at those scales, or None."""
    scales = spec["scales"]
    if len(set(values.values())) == 1:
        return str(next(iter(values.values())))
    for variable in scales[next(iter(values))]:
        if all(scales[s].get(variable) == v for s, v in values.items()):
            return variable
    for entry, sizes in zip(params.entries, params.sizes):
        for k, dim in enumerate(entry["shape"]):
            if all(len(sizes[s]) > k and sizes[s][k] == v for s, v in values.items()):
                return str(dim)
    return None


def write_shapes(task_id, tensors, spec, params):
    for t in tensors:
        if t.param is not None and t.transform != "reshape":
            shape = [str(d) for d in params.entries[t.param]["shape"]]
            t.shape = swapped(shape, *t.transform) if t.transform else shape
    for t in tensors:
        if t.shape is not None:
            continue
        module = t.name.rsplit(".", 1)[0] if "." in t.name else ""
        sibling = next((o for o in tensors if o.shape is not None and o.sizes == t.sizes
                        and (o.name.rsplit(".", 1)[0] if "." in o.name else "") == module), None)
        if sibling is not None:
            t.shape = list(sibling.shape)
            continue
        rank = len(t.sizes[next(iter(t.sizes))])
        t.shape = [dimension_expression({s: t.sizes[s][k] for s in t.sizes}, spec, params) for k in range(rank)]
        if None in t.shape:
            raise MatchError(f"{task_id}: no expression of the scale variables gives '{t.name}''s sizes {t.sizes}")


def check_shapes(task_id, tensors, spec, params):
    """What is written says what was found: at every scale the module was built at, the sizes; at every
    scale, a matched tensor's element count is its param's."""
    for scale, variables in spec["scales"].items():
        for t in tensors:
            sizes = [evaluate(d, variables) for d in t.shape]
            if scale in t.sizes and sizes != t.sizes[scale]:
                raise MatchError(f"{task_id}: '{t.name}' written as {t.shape} gives {sizes} at scale '{scale}', "
                                 f"the module has {t.sizes[scale]}")
            if t.param is not None and element_count(sizes) != element_count(params.sizes[t.param][scale]):
                raise MatchError(f"{task_id}: '{t.name}' written as {t.shape} has another element count than "
                                 f"param '{params.name(t.param)}' at scale '{scale}'")


# --- the spec's text ---------------------------------------------------------------------------------------

def quoted(text):
    return "'" + text.replace("'", "''") + "'"


def entry_text(t, params):
    fields = [f"name: {t.name}", f"shape: [{', '.join(t.shape)}]"]
    if t.param is not None:
        fields.append(f"param: {params.name(t.param)}")
        if t.transform == "reshape":
            fields.append("transform: reshape")
        elif t.transform:
            fields.append(f"transform: 'transpose({t.transform[0]}, {t.transform[1]})'")
    else:
        fields.append(f"unmatched: {quoted(t.unmatched)}")
    return "    - {" + ", ".join(fields) + "}"


def block_lines(task_id, tensors, params):
    parameters = [t for t in tensors if not t.buffer]
    buffers = [t for t in tensors if t.buffer]
    crl_only = CRL_ONLY.get(task_id, {})
    if not tensors and not crl_only:
        return [f"{KEY}: {{parameters: [], buffers: []}}"]
    lines = [f"{KEY}:"]
    for label, group in (("parameters", parameters), ("buffers", buffers)):
        lines.append(f"  {label}:" + ("" if group else " []"))
        lines += [entry_text(t, params) for t in group]
    if crl_only:
        lines.append("  crl_only:")
        lines += [f"    {name}: {quoted(why)}" for name, why in crl_only.items()]
    return lines


def spec_with_block(text, block):
    """The file's text with `block` as its kernelbench_params, last in the spec section."""
    lines = text.split("\n")
    start = lines.index("// crl:spec")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("// crl:")), len(lines))
    section, skipping = [], False
    for line in lines[start + 1:end]:
        if line.startswith(KEY + ":"):
            skipping = True
            continue
        if skipping and (line.startswith(" ") or line == ""):
            continue
        skipping = False
        section.append(line)
    while section and section[-1] == "":
        section.pop()
    return "\n".join(lines[:start + 1] + section + block + lines[end:])


# --- a task, the suite ------------------------------------------------------------------------------------

def derive_task(task_id, path, kernelbench):
    """(block lines, kind, ties): kind says how KernelBench's order and shapes relate to the spec's."""
    spec = read_spec(path)
    params = Params(spec)
    module = eager_suite.load_module(kernelbench_file(kernelbench, task_id))
    tensors = kernelbench_tensors(task_id, spec, module)
    ties = match(task_id, tensors, params)
    write_shapes(task_id, tensors, spec, params)
    check_shapes(task_id, tensors, spec, params)
    return block_lines(task_id, tensors, params), kind_of(tensors, params), ties


def kind_of(tensors, params):
    order = [t.param for t in tensors if t.param is not None]
    kinds = []
    if not params.entries:
        kinds.append("no params")
    elif order == list(range(len(params.entries))):
        kinds.append("in order")
    else:
        kinds.append("reordered")
    if any(t.transform == "reshape" for t in tensors):
        kinds.append("reshape")
    if any(isinstance(t.transform, tuple) for t in tensors):
        kinds.append("transpose")
    if any(t.param is None and not t.buffer for t in tensors):
        kinds.append("unmatched parameter")
    if any(t.param is None and t.buffer for t in tensors):
        kinds.append("unmatched buffers")
    return ", ".join(kinds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", action="store_true", help="print each task's kind and the ties names decided")
    args, tasks = eager_suite.spec_tool_tasks(parser)
    failures, changed, kinds = [], [], {}
    for task_id, path in tasks:
        try:
            block, kind, ties = derive_task(task_id, path, args.kernelbench)
            kinds.setdefault(kind, []).append(task_id)
            if args.report:
                print(f"{task_id}: {kind}" + "".join(f"\n  name decided: {t}" for t in ties))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            updated = spec_with_block(text, block)
            if updated != text:
                changed.append(task_id)
                if args.check:
                    failures.append(f"{task_id}: the spec's {KEY} are not what KernelBench's module declares")
                else:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(updated)
        except (MatchError, SpecError, add_init_args.InitArgsError) as e:
            failures.append(str(e))
    for f in failures:
        print(f, file=sys.stderr)
    for kind, ids in sorted(kinds.items()):
        print(f"{len(ids):4d} {kind}", file=sys.stderr)
    verb = "differ" if args.check else "rewritten"
    print(f"{len(tasks)} tasks, {len(changed)} {verb}, {len(failures)} failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
