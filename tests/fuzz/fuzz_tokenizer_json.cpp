// libFuzzer harness: tokenizer.json. Inputs that load are used: a fixed text is encoded and
// decoded, and every id is looked up, so a loaded tokenizer must be internally consistent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "policy/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const crl::policy::Tokenizer tok = crl::policy::Tokenizer::from_json(text, "fuzz.json");
    const auto ids = tok.encode("def f(x):\n    return x  # caf\xC3\xA9 <|endoftext|> 123456 \xF0\x9F\x9A\x80");
    tok.decode(ids);
    tok.decode_bytes(ids, true);
    for (int32_t id = 0; id < tok.vocab_size() && id < 4096; ++id) {
      try {
        tok.id_to_token(id);
      } catch (const crl::InputError&) {  // ids the vocabulary leaves unused
      }
    }
  } catch (const crl::InputError&) {
  }
  return 0;
}
