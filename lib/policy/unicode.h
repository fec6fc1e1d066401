// Unicode helpers for the tokenizer: UTF-8 decoding, the character classes its pre-tokenizer
// regexes use (\p{L}, \p{N}, \s), normalisation forms (via utf8proc), and the GPT-2 byte-level
// map from bytes to printable characters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crl::policy {

// The classes the byte-level BPE split patterns distinguish. Every code point is in exactly one:
// Letter = general category L* (\p{L}), Number = N* (\p{N}), Whitespace = the White_Space
// property (what Oniguruma's Unicode \s matches), Other = everything else (punctuation, symbols,
// marks, controls that are not White_Space, unassigned).
enum class CharClass : uint8_t { Letter, Number, Whitespace, Other };

CharClass char_class(char32_t cp);

// White_Space property (Rust's char::is_whitespace, Oniguruma's \s).
bool is_unicode_whitespace(char32_t cp);
// A character of \w in Rust's regex crate, which decides where words end for the single_word
// flag of added tokens: Alphabetic, marks (M*), decimal digits (Nd), connector punctuation (Pc,
// e.g. '_') and the joiners U+200C/U+200D. Alphabetic is taken as L*, Nl and the letter-like
// symbols of Other_Alphabetic outside M* (circled and squared Latin letters).
bool is_word_char(char32_t cp);

// One decoded code point and where it sits in the UTF-8 text.
struct CodePoint {
  char32_t value;
  uint32_t byte_offset;
};

// Decodes UTF-8; throws InputError naming the byte offset of the first malformed sequence.
std::vector<CodePoint> decode_utf8(std::string_view text);
bool is_valid_utf8(std::string_view text);
// Decodes the code point at byte `pos`: returns its length in bytes and stores it in `cp`, or
// returns 0 for a malformed sequence.
size_t decode_utf8_at(std::string_view text, size_t pos, char32_t& cp);
// Appends the UTF-8 encoding of `cp`.
void append_utf8(std::string& out, char32_t cp);
// Replaces malformed UTF-8 with U+FFFD, one per maximal ill-formed subpart (what Rust's
// String::from_utf8_lossy does, so decoded text equals Hugging Face's).
std::string utf8_lossy(std::string_view bytes);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// The normal form of valid UTF-8 text (ASCII text is returned unchanged without a copy's cost).
std::string normalize(std::string_view text, NormalForm form);

// GPT-2's byte-level alphabet: byte b -> a printable code point (bytes that are printable in
// Latin-1 map to themselves, the rest to U+0100 and up in byte order).
char32_t byte_to_unicode(uint8_t byte);
// The inverse; returns -1 for code points outside the alphabet.
int unicode_to_byte(char32_t cp);

}  // namespace crl::policy
