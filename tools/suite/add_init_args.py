#!/usr/bin/env python3
"""Writes (or checks) each suite task's `init_args:`, its KernelBench module's constructor arguments.

For every task of jobs/suite, loads KernelBench's module for the same problem (as
tools/bench/eager_suite.py finds it), calls its get_init_inputs() and reads the expression its
`return` holds, and writes the values as a spec list (docs/program-format.md, `init_args`) in the
order the module takes them: an integer that KernelBench names (a module-level size; for a literal,
the constructor's parameter; for a list's items, the list) is written as the crl scale variable of
the same meaning and the same full-scale value (the same name, or one of ALIASES), so that the
arguments follow crl's scales; every other value is written as KernelBench's literal. A task's spec gets its line just before `scales:`; a line already there is replaced.

Each derivation is checked before anything is written: the arguments evaluated at crl's `full` scale
equal get_init_inputs() (value and Python type, tuples and lists kept apart), and at every scale the
module built from them on the meta device (nothing allocated) has parameters whose shapes are, as a
multiset, those of the spec's params (a scale variable put where it does not belong changes a shape at
the small scale). Exceptions, each with its reason: PARAMS_DIFFER (KernelBench's parameters are not
the spec's) and NARROWED_IN_CODE (a small scale narrows what the constructor's arguments cannot).

KernelBench is not part of crl: point --kernelbench at a checkout of ScalingIntelligence/KernelBench
(commit 423217d; its root or its KernelBench/ folder). Level 3's Mamba2 modules import einops, which
only their forward uses: without it installed, a stand-in module lets them load.
  python3 tools/suite/add_init_args.py --kernelbench .carry/KernelBench            # rewrite the specs
  python3 tools/suite/add_init_args.py --kernelbench .carry/KernelBench --check    # exit 1 on a difference
"""
import argparse
import ast
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import eager_suite  # noqa: E402  (the spec reader, the expression evaluator, KernelBench's file per task)
from eager_suite import SpecError, evaluate, kernelbench_file, read_spec, shape_at, suite_tasks  # noqa: E402

# KernelBench's size names and the crl scale variables that mean the same (level 1's specs use short
# names). A KernelBench size is written as a crl variable only when the name is the same or listed here.
ALIASES = {
    "batch_size": ["batch"],
    "in_channels": ["cin", "channels"],
    "input_channels": ["in_channels", "cin"],
    "out_channels": ["cout", "channels"],  # channels: a depthwise convolution's, in = out
    "groups": ["channels"],  # a depthwise convolution's, one group per channel
    "input_size": ["in_features"],
    "output_size": ["out_features"],
    "hidden_size": ["hidden"],
    "num_input_features": ["in_features", "in_channels"],
    "num_output_features": ["out_features"],
    "features": ["channels", "features"],
    "num_features": ["features", "channels"],
    "num_layers": ["layers"],
    "num_clusters": ["clusters", "cluster_size"],
    "num_classes": ["classes"],
    "output_classes": ["classes"],
    "image_size": ["image", "img"],
    "patch_size": ["patch"],
    "embed_dim": ["embed"],
    "seq_length": ["seq_len"],
    "growth_rate": ["growth"],
    "squeeze_channels": ["squeeze"],
    "expand1x1_channels": ["expand"],
    "expand3x3_channels": ["expand"],
    "layer_sizes": ["hidden"],  # an MLP's hidden widths: each element
    "hidden_layer_sizes": ["hidden"],
}

# Tasks whose KernelBench parameters are not the spec's params (by shape, as a multiset), and why.
PARAMS_DIFFER = {
    "level2/026_conv_transpose3d_add_hardswish": "KernelBench declares a bias parameter that forward never reads",
}
# Tasks whose smaller scales narrow widths that KernelBench's module fixes in its code (not in the
# arguments get_init_inputs() passes): their parameters are compared at full scale only.
NARROWED_IN_CODE = {
    "level3/005_alexnet": "fully connected width 4096",
    "level3/010_resnet101": "stem and stage widths (64 ... 2048)",
    "level3/011_vgg16": "channel widths (64 ... 512)",
    "level3/012_vgg19": "channel widths (64 ... 512)",
    "level3/015_densenet121": "the stem's 64 channels",
    "level3/016_densenet201": "the stem's 64 channels",
    "level3/019_mobilenet_v1": "channel widths (32 ... 1024)",
    "level3/029_swin_mlp": "embed_dim, a default of the constructor that get_init_inputs() does not pass",
    "level3/030_swin_transformer_v2": "embed_dim, a default of the constructor that get_init_inputs() does not pass",
}


class InitArgsError(Exception):
    pass


# --- init_args as the spec writes them --------------------------------------------------------------

def format_number(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))  # Python's shortest round trip, as crl's python_literal writes it


def format_arg(arg):
    """One entry of the YAML flow list: tuples and lists quoted (they hold commas)."""
    text = render(arg)
    return f"'{text}'" if text.startswith(("(", "[")) else text


def render(arg):
    kind, payload = arg
    if kind == "expr":
        return payload
    if kind == "tuple":
        inner = ", ".join(render(a) for a in payload)
        return f"({inner},)" if len(payload) == 1 else f"({inner})"
    return "[" + ", ".join(render(a) for a in payload) + "]"


def init_args_line(args):
    return "init_args: [" + ", ".join(format_arg(a) for a in args) + "]"


def parse_arg(text):
    """A spec entry (docs/program-format.md) as (kind, payload); kind expr, tuple or list."""
    if isinstance(text, bool):
        return ("expr", "true" if text else "false")
    if isinstance(text, (int, float)):
        return ("expr", format_number(text))
    if not isinstance(text, str):
        raise InitArgsError(f"init_args entry {text!r} is not a single value (quote tuples and lists)")
    s = text.strip()
    node = ast.parse(s, mode="eval").body
    if isinstance(node, (ast.Tuple, ast.List)):
        kind = "tuple" if isinstance(node, ast.Tuple) else "list"
        return (kind, [parse_arg(ast.get_source_segment(s, e)) for e in node.elts])
    return ("expr", s)


def evaluate_arg(arg, variables):
    """The Python value of a parsed entry at one scale: what the module's constructor receives."""
    kind, payload = arg
    if kind == "tuple":
        return tuple(evaluate_arg(a, variables) for a in payload)
    if kind == "list":
        return [evaluate_arg(a, variables) for a in payload]
    if payload in ("true", "false"):
        return payload == "true"
    return evaluate(payload, variables)


def same_value(a, b):
    """Equal values of the same Python types (1 is not 1.0, a tuple is not a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


# --- deriving them from KernelBench's module ----------------------------------------------------------

def return_elements(path):
    """The element expressions of get_init_inputs()'s `return [...]`, and the module's assignments."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    assigned = {}
    returned = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
        if isinstance(node, ast.FunctionDef) and node.name == "get_init_inputs":
            for stmt in node.body:
                if isinstance(stmt, ast.Return):
                    returned = stmt.value
    if not isinstance(returned, ast.List):
        raise InitArgsError(f"{path}: get_init_inputs() does not return a list literal")
    return returned.elts, assigned


def crl_variable(name, value, full):
    """The crl scale variable for KernelBench's size `name` = value, or None."""
    for candidate in [name] + ALIASES.get(name, []):
        if full.get(candidate) == value:
            return candidate
    return None


def derive(value, node, name, assigned, full):
    """(kind, payload) for one constructor argument, from its value and KernelBench's expression.
    `name` is what KernelBench calls the value where its expression is a literal: the constructor's
    parameter, or for the elements of a list or tuple, the list's own name (layer_sizes)."""
    if isinstance(node, ast.Name):
        name = node.id
        if isinstance(value, (tuple, list)) and node.id in assigned:
            node = assigned[node.id]  # bias_shape = (out_channels, 1, 1): the names inside count
    if isinstance(value, (tuple, list)):
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == len(value) else [None] * len(value)
        items = [derive(v, n, name, assigned, full) for v, n in zip(value, elements)]
        return ("tuple" if isinstance(value, tuple) else "list", items)
    if isinstance(value, bool) or isinstance(value, float):
        return ("expr", format_number(value))
    if isinstance(value, int):
        variable = crl_variable(name, value, full) if name else None
        return ("expr", variable or str(value))
    raise InitArgsError(f"constructor argument {value!r} of type {type(value).__name__} has no spec form")


def constructor_parameters(module):
    """The names of Model.__init__'s positional parameters, in order (self left out)."""
    import inspect
    return [p.name for p in inspect.signature(module.Model.__init__).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]


def param_shapes(module, values):
    """Shapes of the module's parameters in declaration order, built on the meta device (nothing
    allocated), or on the CPU where its constructor reads values (Swin's masks call .item())."""
    import torch
    try:
        with torch.device("meta"):
            model = module.Model(*values)
    except RuntimeError:
        model = module.Model(*values)
    return [list(p.shape) for p in model.parameters()]


def derive_task(task_id, path, kernelbench):
    spec = read_spec(path)
    scales = spec["scales"]
    kb_path = kernelbench_file(kernelbench, task_id)
    module = eager_suite.load_module(kb_path)
    values = list(module.get_init_inputs())
    elements, assigned = return_elements(kb_path)
    if len(elements) != len(values):
        raise InitArgsError(f"{kb_path}: get_init_inputs() returns {len(values)} values from {len(elements)} expressions")
    names = constructor_parameters(module)
    names += [None] * (len(values) - len(names))
    args = [derive(v, n, p, assigned, scales["full"]) for v, n, p in zip(values, elements, names)]
    check_task(task_id, spec, args, module, values)
    return args


def check_task(task_id, spec, args, module, values):
    """The arguments at full scale are KernelBench's; at every scale the module's parameters are the spec's."""
    scales = spec["scales"]
    at_full = [evaluate_arg(a, scales["full"]) for a in args]
    if not same_value(at_full, values):
        raise InitArgsError(f"{task_id}: init_args at full scale give {at_full!r}, KernelBench's get_init_inputs() {values!r}")
    if task_id in PARAMS_DIFFER:
        return
    for scale, variables in scales.items():
        if scale != "full" and task_id in NARROWED_IN_CODE:
            continue
        try:
            kb = param_shapes(module, [evaluate_arg(a, variables) for a in args])
        except Exception as e:
            raise InitArgsError(f"{task_id}: the module does not build at scale '{scale}': {type(e).__name__}: {e}")
        crl = [shape_at(t, variables) for t in spec.get("params") or []]
        if sorted(map(str, kb)) != sorted(map(str, crl)):
            raise InitArgsError(f"{task_id}: at scale '{scale}' KernelBench's parameters are {kb[:8]}, the spec's {crl[:8]}")


# --- the spec files ------------------------------------------------------------------------------------

def spec_with_init_args(text, line):
    """The file's text with `line` as its init_args (before `scales:` in the spec section)."""
    lines = text.split("\n")
    start = lines.index("// crl:spec")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("// crl:")), len(lines))
    section = [l for l in lines[start + 1:end] if not l.startswith("init_args:")]
    scales = next(i for i, l in enumerate(section) if l.startswith("scales:"))
    section.insert(scales, line)
    return "\n".join(lines[:start + 1] + section + lines[end:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args, tasks = eager_suite.spec_tool_tasks(parser)
    failures, changed = [], []
    for task_id, path in tasks:
        try:
            line = init_args_line(derive_task(task_id, path, args.kernelbench))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            updated = spec_with_init_args(text, line)
            if updated != text:
                changed.append(task_id)
                if args.check:
                    failures.append(f"{task_id}: the spec's init_args are not `{line}`")
                else:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(updated)
        except (InitArgsError, SpecError) as e:
            failures.append(str(e))
    for f in failures:
        print(f, file=sys.stderr)
    verb = "differ" if args.check else "rewritten"
    print(f"{len(tasks)} tasks, {len(changed)} {verb}, {len(failures)} failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
