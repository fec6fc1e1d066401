#!/usr/bin/env python3
"""Golden files for crl's tokenizer, made with Hugging Face `tokenizers` (the reference).

Trains three small byte-level BPEs on tests/data/policy/tokenizers/train_corpus.txt:
  qwen2_like   NFC normaliser + the Qwen2 split regex, merges saved as "a b" strings
  llama3_like  no normaliser + the Llama 3 split regex, ignore_merges, a <|begin_of_text|>
               template, merges saved as ["a", "b"] pairs
  gpt2_like    ByteLevel pre-tokenizer alone (use_regex: the GPT-2 pattern, add_prefix_space)
both with special tokens <|endoftext|>, <|im_start|>, <|im_end|> and non-special added tokens
that exercise the lstrip / rstrip / single_word / normalized flags. Then encodes a corpus of
hard cases (sources, CRLF, runs of whitespace, digits, apostrophes, CJK, emoji, combining marks,
special tokens) with and without special-token parsing, and decodes the ids back.

Writes <out>/<name>/tokenizer.json and <out>/<name>/golden.json for each, and
<out>/hf_encode_bench.json: HF's encode throughput on the C++ source text that
bench/tokenizer_bench.cpp times (compare the two figures).

Usage (the committed files come from the default --out):
  ~/.local/share/crl/golden-venv/bin/python tools/golden/make_tokenizer_golden.py
  python3 tools/golden/make_tokenizer_golden.py --out $OUT      # on the GPU machine, to compare
  CRL_KEEP_TRAINED_TOKENIZER=/tmp/t.json build/tests/policy/policy_bpe_trainer_test && \
  python3 tools/golden/make_tokenizer_golden.py --check-crl-tokenizer /tmp/t.json \
      > tests/data/policy/tokenizers/crl_trained/hf_ids.json
      (HF loads the tokenizer.json crl's BPE trainer wrote and encodes the cases; the test then
      checks crl's ids equal HF's)
Needs tokenizers==0.23.2 (the GPU machine's version; others may train differently).
"""
import argparse
import hashlib
import json
import os
import platform
import random
import sys
import time
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "tests", "data", "policy", "tokenizers")

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 3000

CPP_SOURCE = """#include <cuda_runtime.h>
#include <vector>

template <typename T>
__global__ void axpy(int n, T a, const T* __restrict__ x, T* __restrict__ y) {
\tconst int i = blockIdx.x * blockDim.x + threadIdx.x;
\tif (i < n) y[i] = a * x[i] + y[i];   // 2 FLOPs, 12 bytes
}

int main(int argc, char** argv) {
    std::vector<float> h(1 << 20, 1.0f);
    axpy<float><<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
    if (cudaGetLastError() != cudaSuccess) { return 1; }
    return 0;
}
"""

CASES = [
    ("cpp_source", CPP_SOURCE),
    ("cpp_source_crlf", CPP_SOURCE.replace("\n", "\r\n")),
    ("cuda_launch", "kernel<<<dim3(128, 1, 1), dim3(256), smem, stream>>>(ptr->data(), n);"),
    ("prose", "The reference runs in 1.84 ms; the candidate in 0.61 ms. That's a 3.02x speedup!"),
    ("apostrophes", "I'm sure we'll see it's what they've done; you'd know, I'd say. don't can't"),
    ("apostrophes_upper", "IT'S WHAT THEY'VE DONE. WE'LL SEE. I'M SURE. 'S 'LL 'RE 'VE 'M 'D 'T"),
    ("apostrophes_mixed", "'Re 'rE 'lL 'Ll 'x '' ''s ' 's's'S 'ſ x'ſt"),
    ("spaces_runs", "a  b   c    d     e\t\tf\t \tg \t h      "),
    ("leading_spaces", "     leading and trailing     "),
    ("tabs_only", "\t\t\t"),
    ("newlines", "line one\n\nline two\n \n  \n\t\nline three\n"),
    ("crlf", "first\r\nsecond\r\n\r\nthird\r\n  \r\n"),
    ("lone_cr", "a\rb\r\rc \r d"),
    ("space_newline_mix", "x  \n  y \n\n z\n"),
    ("digits", "1234567890 12345 3.14159265358979 1e-5 0x7fffffff 2**31 65536"),
    ("long_digits", "31415926535897932384626433832795028841971693993751058209749445923"),
    ("unicode_digits", "٣٤٥ ①②③ Ⅻ ½ 二〇二六 ０１２"),
    ("cjk_zh", "深度学习模型的训练需要大量的计算资源。这个内核的速度是参考实现的三倍！"),
    ("cjk_ja", "カーネルの最適化にはメモリアクセスのパターンが重要です。"),
    ("cjk_ko", "커널 최적화에는 메모리 접근 패턴이 중요합니다."),
    ("emoji", "🚀 fast 🔥🔥 done ✅ 👨‍👩‍👧 👍🏽 🇫🇷 ❤️"),
    ("combining_nfd", "Cafe\u0301 A\u030angstro\u0308m n\u0303 e\u0301\u0301"),
    ("compat_chars", "ﬁle Å ℃ ™ ½ ｆｕｌｌ"),
    ("nfc_edge", "\u212b \u2126 \u0041\u030a \u1e0b\u0323"),
    ("unicode_spaces", "a\u00a0b\u3000c\u2003d\u2009e\u0085f\u202fg \u00a0 h"),
    ("controls", "a\x00b\x01c\x7fd\x0be\x0cf\x1bg"),
    ("punctuation", "...!!!??? ---> a+b foo()->bar[0] #include <x.h> ''' \"\" ;;"),
    ("special_tokens", "<|im_start|>user\nMake it faster.<|im_end|>\n<|im_start|>assistant\n"),
    ("special_adjacent", "<|im_end|><|im_end|>text<|endoftext|><|endoftext|>"),
    ("special_partial", "<|im_sta <|im_end| |im_end|> <|im_start|"),
    ("added_flags", "  <think>  reasoning here </think>   answer <think></think>"),
    ("single_word", "crlword xcrlword crlwordx crlword. (crlword) 9crlword"),
    ("normalized_added", "caf\u00e9 cafe\u0301 CAF\u00c9"),
    ("long_word", "x" * 300 + " " + "ab" * 200),
    ("mixed_script", "kernel内核カーネル커널ядро"),
    ("empty", ""),
    ("single_space", " "),
    ("single_newline", "\n"),
]


# Random strings over the characters the split patterns and added tokens treat specially, so the
# scanner meets combinations nobody thought to write down. random.Random(seed) is the same on
# every Python 3 (the GPU machine's too).
FUZZ_ALPHABET = [" ", " ", " ", "\t", "\n", "\n", "\r", "\u00a0", "\u3000", "\u0085", "\x0b",
                 "'", "'", "s", "S", "l", "L", "d", "t", "r", "e", "v", "m", "\u017f", "x", "Z",
                 "0", "1", "9", "\u0663", "\u216b", "\u00e9", "\u6df1", "\u30ab", ".", ",", "(",
                 ")", "<", "|", ">", "_", "\u0301", "\u030a", "\U0001f680", "\u200d", "\u00a9",
                 "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "crlword", "cafe\u0301"]


def fuzz_cases(count=160, seed=20261130):
    rng = random.Random(seed)
    return [(f"fuzz_{i:03d}", "".join(rng.choice(FUZZ_ALPHABET) for _ in range(rng.randint(1, 40))))
            for i in range(count)]


CASES += fuzz_cases()


def train(kind, corpus_lines):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3_like")))
    if kind == "qwen2_like":
        tok.normalizer = normalizers.NFC()
        regex = QWEN2_REGEX
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        regex = LLAMA3_REGEX
    if kind == "gpt2_like":
        # ByteLevel alone, splitting with its own GPT-2 regex, and a prefix space.
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    special = (["<|begin_of_text|>"] if kind == "llama3_like" else []) + SPECIAL
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE if kind != "gpt2_like" else 1000,
                                  special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus_lines, trainer)
    if kind == "llama3_like":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)]),
        ])
    # Non-special added tokens with every flag; "caf\u0065\u0301" (NFD) is matched in NFC form.
    tok.add_tokens([
        AddedToken("<think>", lstrip=True, normalized=False),
        AddedToken("</think>", rstrip=True, normalized=False),
        AddedToken("crlword", single_word=True, normalized=True),
        AddedToken("cafe\u0301", normalized=True),
    ])
    return tok


def merges_as_strings(tokenizer_json):
    data = json.loads(tokenizer_json)
    data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                               for m in data["model"]["merges"]]
    return json.dumps(data, ensure_ascii=False, indent=2)


def golden_for(tok):
    out = []
    for name, text in CASES:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=True).ids
        ids_plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        ids_unparsed = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        out.append({
            "name": name,
            "text": text,
            "ids": ids,
            "ids_without_template": ids_plain,
            "ids_special_as_text": ids_unparsed,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        })
    # Decoding ids that split a UTF-8 character: the lossy replacement must match too.
    cut = [i for i in tok.encode("深度🚀", add_special_tokens=False).ids]
    partial = []
    for k in range(1, len(cut) + 1):
        partial.append({"ids": cut[:k], "decoded": tok.decode(cut[:k])})
    return {"cases": out, "partial_decodes": partial}


def bench_hf(tok, text, repeats=20):
    """Encode throughput in MB/s, by wall clock and by this process's CPU time (Google Benchmark
    reports CPU time, so compare cpu figures with bench_tokenizer's bytes_per_second)."""
    data = text.encode("utf-8")

    def timed():
        w0, c0 = time.perf_counter(), time.process_time()
        tok.encode(text, add_special_tokens=False)
        return time.perf_counter() - w0, time.process_time() - c0

    cold_wall, cold_cpu = timed()
    runs = sorted(timed() for _ in range(repeats))
    wall = runs[len(runs) // 2][0]
    cpu = sorted(r[1] for r in runs)[len(runs) // 2]
    mb = len(data) / 1e6
    return {"bytes": len(data), "cold_wall_mb_per_s": mb / cold_wall,
            "cold_mb_per_s": mb / max(cold_cpu, 1e-9), "warm_wall_mb_per_s": mb / wall,
            "warm_mb_per_s": mb / max(cpu, 1e-9)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=DATA, help="output folder (default: the committed goldens)")
    parser.add_argument("--check-crl-tokenizer", help="a tokenizer.json written by crl to load with HF")
    args = parser.parse_args()
    if tokenizers.__version__ != "0.23.2":
        print(f"warning: tokenizers {tokenizers.__version__}, goldens were made with 0.23.2",
              file=sys.stderr)

    if args.check_crl_tokenizer:
        # HF's ids for every case under a tokenizer.json that crl's BPE trainer wrote; committed
        # as crl_trained/hf_ids.json, which tests/policy/bpe_trainer_test.cpp compares with crl.
        with open(args.check_crl_tokenizer, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        tok = Tokenizer.from_file(args.check_crl_tokenizer)
        result = {"tokenizers_version": tokenizers.__version__, "tokenizer_sha256": digest,
                  "ids": {name: tok.encode(text).ids for name, text in CASES}}
        json.dump(result, sys.stdout)
        return

    with open(os.path.join(DATA, "train_corpus.txt"), encoding="utf-8") as f:
        corpus = f.read()
    lines = corpus.splitlines(keepends=True)
    os.makedirs(args.out, exist_ok=True)
    bench = {"tokenizers_version": tokenizers.__version__, "python": platform.python_version(),
             "machine": platform.machine(), "text": "tests/data/policy/tokenizers/train_corpus.txt"}
    for kind in ("qwen2_like", "llama3_like", "gpt2_like"):
        tok = train(kind, lines)
        text = tok.to_str(pretty=True)
        if kind == "qwen2_like":
            text = merges_as_strings(text)
        folder = os.path.join(args.out, kind)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(text)
        # Encode with the tokenizer as saved (and re-loaded), which is what crl reads.
        reloaded = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        golden = golden_for(reloaded)
        golden["tokenizers_version"] = tokenizers.__version__
        golden["unicode_nfc_check"] = unicodedata.normalize("NFC", "e\u0301") == "\u00e9"
        with open(os.path.join(folder, "golden.json"), "w", encoding="utf-8") as f:
            # One case per line: small, and diffs show which cases changed.
            f.write("{\n")
            for key in ("tokenizers_version", "unicode_nfc_check"):
                f.write(f" {json.dumps(key)}: {json.dumps(golden[key])},\n")
            for key in ("cases", "partial_decodes"):
                rows = ",\n  ".join(json.dumps(c, ensure_ascii=False) for c in golden[key])
                f.write(f" {json.dumps(key)}: [\n  {rows}\n ]{',' if key == 'cases' else ''}\n")
            f.write("}\n")
        bench[kind] = bench_hf(reloaded, corpus)
        print(f"{kind}: vocab {reloaded.get_vocab_size()}, {len(CASES)} cases, HF encode "
              f"{bench[kind]['warm_mb_per_s']:.2f} MB/s warm (CPU time), "
              f"{bench[kind]['warm_wall_mb_per_s']:.2f} MB/s (wall)")
    out_bench = os.path.join(args.out, "hf_encode_bench.json")
    with open(out_bench, "w") as f:
        json.dump(bench, f, indent=1)
    print(f"wrote {args.out} and {out_bench}")


if __name__ == "__main__":
    main()
