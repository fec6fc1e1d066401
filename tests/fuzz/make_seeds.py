#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz harness into tests/fuzz/corpus/<harness>/ (run from anywhere:
python3 tests/fuzz/make_seeds.py). Seeds are small valid inputs taken from the repository's own
test data and suite, so the fuzzers start from inputs that reach deep into each parser."""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def put(harness, name, data):
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def suite_programs():
    for name in ["level1/022_tanh.crl", "level1/001_square_matmul.crl", "level2/001_conv2d_relu_bias_add.crl"]:
        path = ROOT / "jobs" / "suite" / name
        if path.exists():
            yield path.name, path.read_text()


def spec_of(program):
    lines = program.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.strip() == "// crl:spec") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("// crl:"))
    return "".join(lines[start:end])


def programs_and_specs():
    for name, text in suite_programs():
        put("fuzz_program_text", name, text)
        put("fuzz_task_spec", name.replace(".crl", ".yaml"), spec_of(text))
    put("fuzz_program_text", "bom_crlf.crl", "\ufeff// crl:host\r\nint forward();\r\n// crl:device\r\nvoid k() {}")


def expressions():
    for i, text in enumerate(["2 * n * n * n", "(n + 1) // 2 - n % 3", "-(-n) / 4", "1e-4 * n", "((n))//-1",
                              "4 * 3 * n * n + 7 % -2"]):
        put("fuzz_expression", f"expr{i}", struct.pack("<q", 4096) + text.encode())


def safetensors_image(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    put("fuzz_safetensors_header", "two_tensors.safetensors", safetensors_image(
        {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "b": ("BF16", [3], b"\0\x3f" * 3)}, {"format": "pt"}))
    put("fuzz_safetensors_header", "bool_and_empty.safetensors", safetensors_image(
        {"mask": ("BOOL", [2, 2], b"\x01\x00\x01\x01"), "none": ("I64", [0, 5], b"")}))


def tokenizer():
    # A small byte-level BPE in the Qwen2 form: the 256 byte tokens, a few merges, special tokens.
    base = json.loads((ROOT / "tests/data/policy/tokenizers/qwen2_like/tokenizer.json").read_text())
    vocab = {t: i for t, i in base["model"]["vocab"].items() if i < 400}
    merges = []
    for m in base["model"]["merges"]:
        left, right = m.split(" ") if isinstance(m, str) else m
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(f"{left} {right}")
    base["model"]["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    base["model"]["merges"] = merges
    n = len(vocab)
    base["added_tokens"] = [t for t in base["added_tokens"] if t["id"] < n] + [
        dict(t, id=n + k) for k, t in enumerate(t for t in base["added_tokens"] if t["id"] >= 3000)]
    assert sorted(vocab.values()) == list(range(n)), "seed vocabulary must stay dense"
    put("fuzz_tokenizer_json", "qwen2_small.json", json.dumps(base, ensure_ascii=False))
    llama = json.loads((ROOT / "tests/data/policy/tokenizers/llama3_like/tokenizer.json").read_text())
    llama["model"]["vocab"] = base["model"]["vocab"]
    llama["model"]["merges"] = merges
    llama["added_tokens"] = base["added_tokens"]
    special = llama["post_processor"]["processors"][1]["special_tokens"]
    for token in special.values():
        token["ids"] = [0]
    put("fuzz_tokenizer_json", "llama3_small.json", json.dumps(llama, ensure_ascii=False))


def configs():
    for path in sorted((ROOT / "tests/data/policy/models").glob("*/config.json")):
        put("fuzz_config_json", path.parent.name + ".json", path.read_text())


def job_files():
    for path in sorted((ROOT / "jobs").glob("*.yaml")):
        put("fuzz_job_config", path.name, path.read_text())
    # Anchors and aliases: one used twice, one inside itself (yaml-cpp builds a cycle), a bomb.
    put("fuzz_job_config", "alias_reused.yaml", "name: a\nmodel: m\nbase: &b {lr: 0.1}\nstages: [*b, *b]\n")
    put("fuzz_job_config", "alias_cycle.yaml", "name: a\nmodel: m\nloop: &a [1, *a]\n")
    bomb = "name: a\nmodel: m\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, 10):
        bomb += f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]\n"
    put("fuzz_job_config", "alias_bomb.yaml", bomb)


def recipes(harness, count, seed):
    """Recipe harnesses (fuzz_results_file, fuzz_yaml_aliases, fuzz_results_py) take any bytes: a few
    fixed pseudo-random starts, so the corpus is the same on every machine."""
    import random
    rng = random.Random(seed)
    for i in range(count):
        put(harness, f"recipe{i}", bytes(rng.randrange(256) for _ in range(rng.choice([16, 64, 256, 1024]))))


def jsonl():
    put("fuzz_jsonl", "candidates.jsonl",
        '{"task": "level1/019_relu", "program": "// crl:host\\nat::Tensor forward(const at::Tensor& x);", "id": "a"}\n'
        '{"task": "level1/019_relu", "completion": "Plan.\\n```cpp\\n// crl:host\\nint x;\\n```", "speedup": 1.5}\n'
        '{"task": "level1/019_relu", "program": "// crl:host\\nint y;", "id": [1, {"k": [2]}]}\n')
    put("fuzz_jsonl", "regression-deep-id", '{"task": "t", "program": "// crl:host\\nint x;", "id": '
        + "[" * 5000 + "]" * 5000 + "}\n")


def frame(message):
    body = json.dumps(message).encode()
    return struct.pack("<II", 0x4A4C5243, len(body)) + body


def channel():
    meta = {"sizes": [2, 3], "dtype": "float32"}
    put("fuzz_worker_channel", "fill", frame({"op": "fill", "slots": [{"slot": 0, "seed": 7, "edges": False, "spread": False}],
                                              "both": True}))
    put("fuzz_worker_channel", "compare", frame({"op": "compare", "key": "trial:0", "outputs": [
        dict(meta, device="cpu", address=4096), dict(meta, device="cuda", ipc_handle="00" * 64, offset=256)]}))
    put("fuzz_worker_channel", "arena", frame({"op": "arena", "layout": {"arguments": [meta], "slots": 4},
                                               "output_region_bytes": 1024}))
    put("fuzz_worker_channel", "guard_reply", frame({"ok": True, "checks": [{"name": "threads", "passed": True, "kind": "deferred_work",
                                                     "detail": "1 thread"}], "groups": [{"name": "g", "kind": "output_cache",
                                                     "seed_index": 1, "count": 1}], "outputs": [dict(meta, device="cpu", address=64)]}))
    put("fuzz_worker_channel", "error_reply", frame({"ok": False, "error": "CUDA out of memory", "sticky": False,
                                                     "out_of_memory": True}))
    put("fuzz_worker_channel", "time_reply", frame({"ok": True, "batch": {"metas": [dict(meta, device="cpu")], "handles": [],
                                                    "calls": [[64], [128]]}, "timeline": {"first_call_host_us": 3.5}}))


if __name__ == "__main__":
    programs_and_specs()
    expressions()
    safetensors()
    tokenizer()
    configs()
    job_files()
    channel()
    recipes("fuzz_results_file", 6, 41)
    recipes("fuzz_yaml_aliases", 6, 42)
    recipes("fuzz_results_py", 6, 43)
    jsonl()
