// Trains a byte-level BPE tokenizer on a corpus (for `crl init-model`) and writes it as a
// tokenizer.json that Hugging Face `tokenizers` and crl::policy::Tokenizer both load: NFC
// normaliser, the Qwen2 split pattern, ByteLevel pre-tokenizer and decoder, special tokens first.
//
// The algorithm is the classic one Hugging Face's BpeTrainer also uses: count pre-tokenized
// words, then repeatedly merge the most frequent adjacent pair (ties: the pair of smaller ids),
// updating pair counts incrementally, until the vocabulary reaches the asked size or no pair
// occurs min_frequency times. Deterministic: the same corpus and options give the same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "policy/tokenizer.h"

namespace crl::policy {

struct BpeTrainerOptions {
  // Total vocabulary: special tokens + 256 byte tokens + merges. The result is smaller when the
  // corpus runs out of pairs seen min_frequency times.
  int32_t vocab_size = 4096;
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  int64_t min_frequency = 2;
  SplitPattern pattern = SplitPattern::Qwen2;
  bool nfc = true;  // declare and apply the NFC normaliser, as Qwen2 does
};

struct BpeTrainingResult {
  std::string tokenizer_json;
  int32_t vocab_size = 0;  // what was reached
  int32_t merges = 0;
};

// Trains on `corpus` (valid UTF-8; special tokens' text in it is cut out, never merged).
// Throws InputError for a vocab_size too small to hold the special and byte tokens, duplicate
// or empty special tokens, or malformed UTF-8.
BpeTrainingResult train_byte_level_bpe(std::string_view corpus, const BpeTrainerOptions& options);

// Trains and writes `path` atomically; returns the result (load it with Tokenizer::from_file).
BpeTrainingResult train_byte_level_bpe_to_file(std::string_view corpus,
                                               const BpeTrainerOptions& options,
                                               const std::filesystem::path& path);

}  // namespace crl::policy
