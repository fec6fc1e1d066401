#!/usr/bin/env python3
"""Golden files for crl's chat templates (lib/rl/chat_template.cpp), made with transformers'
apply_chat_template(add_generation_prompt=True), the reference. Tokenizer only: no weights, no torch.

Writes, under tests/data/rl/chat/:
  qwen2/tokenizer_config.json    Qwen2-Instruct's ChatML template (tokenizer: the policy tests'
                                 tests/data/policy/tokenizers/qwen2_like, which has <|im_start|> and <|im_end|>)
  llama3/tokenizer.json          tests/data/policy/tokenizers/llama3_like plus the special tokens
                                 <|start_header_id|>, <|end_header_id|>, <|eot_id|>
  llama3/tokenizer_config.json   Meta Llama 3 Instruct's template, bos_token <|begin_of_text|>
  <name>/golden.json             per conversation: the messages, the rendered text and the ids
  other/tokenizer_config.json    a template crl must refuse (Mistral-style [INST])

Usage (the committed files come from this):
  python3 -m venv ~/.local/share/crl/golden-venv && ~/.local/share/crl/golden-venv/bin/pip install transformers jinja2
  ~/.local/share/crl/golden-venv/bin/python tools/golden/make_chat_template_golden.py
"""
import json
import os
import shutil
import sys

import transformers
from transformers import PreTrainedTokenizerFast

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZERS = os.path.join(REPO, "tests", "data", "policy", "tokenizers")
OUT = os.path.join(REPO, "tests", "data", "rl", "chat")

QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

OTHER_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                  "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
                  "{% endif %}{% endfor %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Write a faster ReLU."}],
    [{"role": "system", "content": "You write CUDA."}, {"role": "user", "content": "  Make it fast.\n\n"}],
    [{"role": "user", "content": "first"}, {"role": "assistant", "content": "1. Plan:\n```\n// crl:host\n```"},
     {"role": "user", "content": "Tabs\tand\r\nCRLF, café, 日本語, <|im_start|> inside text"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "\n"}],
]


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)
        f.write("\n")


def make(name, tokenizer_file, config):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_file, **{k: v for k, v in config.items() if k != "chat_template"})
    tok.chat_template = config["chat_template"]
    write_json(os.path.join(folder, "tokenizer_config.json"), config)
    cases = []
    for messages in CONVERSATIONS:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        cases.append({"messages": messages, "text": text, "ids": list(ids)})
    write_json(os.path.join(folder, "golden.json"),
               {"transformers": transformers.__version__, "cases": cases})


def main():
    make("qwen2", os.path.join(TOKENIZERS, "qwen2_like", "tokenizer.json"),
         {"chat_template": QWEN2_TEMPLATE, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})

    llama_folder = os.path.join(OUT, "llama3")
    os.makedirs(llama_folder, exist_ok=True)
    base = PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKENIZERS, "llama3_like", "tokenizer.json"))
    base.add_special_tokens({"additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]})
    llama_tokenizer = os.path.join(llama_folder, "tokenizer.json")
    base.backend_tokenizer.save(llama_tokenizer)
    make("llama3", llama_tokenizer,
         {"chat_template": LLAMA3_TEMPLATE, "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})

    other = os.path.join(OUT, "other")
    os.makedirs(other, exist_ok=True)
    write_json(os.path.join(other, "tokenizer_config.json"),
               {"chat_template": OTHER_TEMPLATE, "bos_token": "<s>", "eos_token": "</s>"})
    print("wrote", OUT, "with transformers", transformers.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
