// The safetensors header (8-byte length, JSON table of tensors) parsed and validated without
// LibTorch, so the checkpoint check before a model is built and the fuzzer need no ATen.
//
// The format: 8 bytes little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the buffer's start. A file is accepted only if
// the header fits in the file, the JSON is well formed with unique names, every tensor's byte
// size equals its shape times its dtype size, and the tensors tile the buffer exactly (sorted by
// offset they are contiguous, non-overlapping, start at 0 and end at the end of the file).
// Anything else is a crl::InputError naming the file and, where there is one, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace crl::policy {

// One tensor's entry in a safetensors header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as written in the file: "F32", "BF16", "F8_E4M3", ...
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // byte offsets into the data buffer (after the header)
  uint64_t data_end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                    // file offset of the data buffer: 8 + header length
  std::vector<SafetensorsEntry> entries;      // sorted by data offsets
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a safetensors dtype name; throws InputError for names crl does not know.
size_t safetensors_dtype_size(const std::string& dtype);
// Every dtype name crl knows, comma-separated (for messages).
std::string safetensors_dtype_names();

// Validates the whole file image `bytes` (its first `size` bytes: the header and the data
// buffer; only BOOL tensors' data is read, to check each byte is 0 or 1). `origin` names the
// file in errors.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size, const std::string& origin);

}  // namespace crl::policy
