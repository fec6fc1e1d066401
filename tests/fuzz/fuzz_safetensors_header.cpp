// libFuzzer harness: a safetensors file image (8-byte length, JSON header, data buffer).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "policy/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = crl::policy::parse_safetensors_header(data, size, "fuzz.safetensors");
    // What was accepted must lie inside the image: every tensor's bytes are in the data buffer.
    for (const auto& e : header.entries) {
      if (e.data_end < e.data_begin || header.data_start + e.data_end > size) __builtin_trap();
    }
  } catch (const crl::InputError&) {
  }
  return 0;
}
