// Byte-level BPE tokenizers from Hugging Face tokenizer.json files, as Qwen2 and Llama 3 ship
// them: normaliser (NFC and friends), pre-tokenizer (Split with the model's regex, ByteLevel),
// BPE model (merges as "a b" strings or ["a", "b"] pairs, ignore_merges), added and special
// tokens with their flags (special, normalized, lstrip, rstrip, single_word), TemplateProcessing
// post-processor and the ByteLevel decoder. Encoding matches Hugging Face `tokenizers` token for
// token (tests/policy/tokenizer_test.cpp checks it against golden files made with it).
//
// Anything in a tokenizer.json that this class does not implement (another model type, another
// regex, byte_fallback, ...) is refused with an InputError naming the file and field, rather
// than tokenized differently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/tokenizer_pretokenizer.h"

namespace crl::policy {

// An entry of tokenizer.json's "added_tokens": text matched before the model sees the input.
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;  // match only where not inside a word
  bool lstrip = false;       // also swallow whitespace on the left
  bool rstrip = false;       // ... and on the right
  bool normalized = false;   // matched on normalised text (else on the raw input)
  bool special = false;      // skipped by decode(skip_special_tokens); not parsed when
                             // encode(parse_special_tokens = false)
};

// Cheap to copy (copies share one loaded vocabulary and piece cache); safe to use from several
// threads at once.
class Tokenizer {
 public:
  // Reads tokenizer.json (or a directory holding one).
  static Tokenizer from_file(const std::filesystem::path& path);
  // Parses tokenizer.json text; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& source);

  // Token ids of `text` (valid UTF-8, else InputError). add_special_tokens applies the
  // post-processor's template (e.g. a leading <|begin_of_text|>); parse_special_tokens = false
  // treats special tokens' text as plain text (Hugging Face's split_special_tokens=True).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special_tokens = true) const;
  // The text of `ids`: byte-level decoded, malformed UTF-8 replaced by U+FFFD as Hugging Face
  // does. Unknown ids are an InputError.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The raw bytes of `ids` (may end inside a UTF-8 sequence: for streaming output).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The text of ids a model sampled. A model's embedding often has more rows than its tokenizer
  // has tokens (Qwen2: 151936 for 151646, padded for the hardware), and sampling can pick one:
  // such ids have no text and decode to nothing, as in Hugging Face's decode. Negative ids and
  // holes inside the vocabulary are still an InputError.
  std::string decode_sampled(std::span<const int64_t> ids, bool skip_special_tokens = false) const;

  // Number of ids: one more than the largest id of the model vocabulary and added tokens.
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of an id (byte-level alphabet for model tokens); InputError if unknown.
  const std::string& id_to_token(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  bool is_special(int32_t id) const;
  SplitPattern split_pattern() const;

  // Pieces cached by the BPE model so far (for tests and benchmarks).
  size_t cache_size() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace crl::policy
