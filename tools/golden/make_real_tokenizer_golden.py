#!/usr/bin/env python3
"""Golden data for crl's tokenizer at a realistic size, made with Hugging Face `tokenizers`.

Trains two byte-level BPEs with 32k+ merges on a real code corpus found on this machine: the
Python standard library's sources (the running interpreter's, e.g. /usr/lib/python3.11) and the
libstdc++ headers (/usr/include/c++/<version>/bits), sorted by path and capped at 8 MB. Both follow
the published tokenizers they stand in for:
  qwen2   NFC normaliser, the Qwen2 split regex, <|endoftext|> <|im_start|> <|im_end|> added
          after the vocabulary (as Qwen2's ids 151643.. are), no template
  llama3  the Llama 3 split regex, ignore_merges, <|begin_of_text|> <|end_of_text|> and 256
          <|reserved_special_token_N|> after the vocabulary, a <|begin_of_text|> template
Characters the corpus never shows (CJK, emoji) fall back to byte tokens, as in the real ones.

Writes <out>/<kind>/tokenizer.json and <out>/<kind>/golden.json (the hard cases of
make_tokenizer_golden.py plus held-out code, each encoded and decoded by HF). The test
tests/policy/real_tokenizer_test.cpp runs this once per build folder and compares crl with it.

Usage: python3 tools/golden/make_real_tokenizer_golden.py --out DIR
"""
import argparse
import glob
import json
import os
import sys
import sysconfig

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_golden import CASES, LLAMA3_REGEX, QWEN2_REGEX, golden_for  # noqa: E402

VOCAB_SIZE = 33280  # minus the 256 byte tokens: 33,024 merges
CORPUS_BYTES = 8 << 20
HELD_OUT_EVERY = 50  # every 50th file is kept out of training and encoded as a golden case


def corpus_files():
    stdlib = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True))
    files += sorted(glob.glob("/usr/include/c++/*/bits/*.h"))
    return [f for f in files if "site-packages" not in f and "/test" not in f]


def read_corpus():
    train, held_out, total = [], [], 0
    for i, path in enumerate(corpus_files()):
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        if i % HELD_OUT_EVERY == 0:
            held_out.append((os.path.basename(path), text[:6000]))
            continue
        train.append(text)
        total += len(text)
        if total >= CORPUS_BYTES:
            break
    return train, held_out[:12]


def build(kind, train):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    regex = QWEN2_REGEX if kind == "qwen2" else LLAMA3_REGEX
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(train, trainer)
    if kind == "qwen2":
        tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>"] +
                               [f"<|reserved_special_token_{n}|>" for n in range(256)])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)]),
        ])
    return tok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    train, held_out = read_corpus()
    extra = [("held_out_" + name, text) for name, text in held_out]
    extra.append(("chat", "<|im_start|>user\nMake it faster.<|im_end|>\n<|begin_of_text|>x<|reserved_special_token_12|>"))
    CASES.extend(extra)
    for kind in ("qwen2", "llama3"):
        tok = build(kind, train)
        folder = os.path.join(args.out, kind)
        os.makedirs(folder, exist_ok=True)
        tok.save(os.path.join(folder, "tokenizer.json"))
        golden = golden_for(tok)
        golden["corpus"] = {"files": len(train), "characters": sum(map(len, train)),
                            "merges": len(json.loads(tok.to_str())["model"]["merges"])}
        with open(os.path.join(folder, "golden.json"), "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False)
        print(kind, golden["corpus"], flush=True)


if __name__ == "__main__":
    main()
