// Parsing and validation of a safetensors header; see safetensors_header.h.
#include "policy/safetensors_header.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace crl::policy {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// The deepest JSON a header needs is 3 levels (object, entry, shape list); anything much deeper
// is not a header, and nlohmann's recursive parser must not be handed unbounded nesting.
constexpr int kMaxJsonDepth = 8;

struct DtypeSize {
  const char* name;
  size_t size;
};

constexpr DtypeSize kDtypeSizes[] = {
    {"F64", 8}, {"F32", 4},  {"F16", 2},  {"BF16", 2},    {"I64", 8},     {"I32", 4},
    {"I16", 2}, {"I8", 1},   {"U8", 1},   {"BOOL", 1},    {"U16", 2},     {"U32", 4},
    {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"C64", 8},
};

const DtypeSize* find_dtype(const std::string& name) {
  for (const auto& d : kDtypeSizes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

[[noreturn]] void bad_file(const std::string& origin, const std::string& what) {
  throw InputError(fmt::format("safetensors file {}: {}", origin, what));
}

[[noreturn]] void bad_tensor(const std::string& origin, const std::string& name, const std::string& what) {
  throw InputError(fmt::format("safetensors file {}, tensor '{}': {}", origin, name, what));
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  out = a * b;
  return true;
}

uint64_t json_uint(const json& value, const std::string& origin, const std::string& name, const char* field) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    bad_tensor(origin, name, fmt::format("{} must hold non-negative integers, got {}", field, value.dump()));
  }
  return value.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, const std::string& origin) {
  if (name.empty()) bad_file(origin, "a tensor has an empty name");
  if (!value.is_object()) bad_tensor(origin, name, "header entry is not a JSON object");
  SafetensorsEntry entry;
  entry.name = name;
  for (const auto& [key, field] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      bad_tensor(origin, name, fmt::format("unknown header field '{}'", key));
    }
  }
  if (!value.contains("dtype") || !value["dtype"].is_string()) bad_tensor(origin, name, "missing or non-string 'dtype'");
  entry.dtype = value["dtype"].get<std::string>();
  const DtypeSize* dtype = find_dtype(entry.dtype);
  if (!dtype) {
    bad_tensor(origin, name, fmt::format("unknown dtype '{}' (known: {})", entry.dtype, safetensors_dtype_names()));
  }
  if (!value.contains("shape") || !value["shape"].is_array()) bad_tensor(origin, name, "missing or non-array 'shape'");
  for (const auto& dim : value["shape"]) {
    const uint64_t d = json_uint(dim, origin, name, "shape");
    if (d > static_cast<uint64_t>(INT64_MAX)) bad_tensor(origin, name, "shape dimension too large");
    entry.shape.push_back(static_cast<int64_t>(d));
  }
  if (!value.contains("data_offsets") || !value["data_offsets"].is_array() || value["data_offsets"].size() != 2) {
    bad_tensor(origin, name, "'data_offsets' must be an array [begin, end]");
  }
  entry.data_begin = json_uint(value["data_offsets"][0], origin, name, "data_offsets");
  entry.data_end = json_uint(value["data_offsets"][1], origin, name, "data_offsets");
  if (entry.data_end < entry.data_begin) {
    bad_tensor(origin, name,
               fmt::format("data_offsets [{}, {}] end before they begin", entry.data_begin, entry.data_end));
  }
  uint64_t bytes = dtype->size;
  for (int64_t d : entry.shape) {
    if (!checked_mul(bytes, static_cast<uint64_t>(d), bytes)) bad_tensor(origin, name, "shape x dtype size overflows");
  }
  if (bytes != entry.data_end - entry.data_begin) {
    bad_tensor(origin, name,
               fmt::format("data_offsets [{}, {}] span {} bytes, but shape [{}] of {} needs {}", entry.data_begin,
                           entry.data_end, entry.data_end - entry.data_begin, fmt::join(entry.shape, ", "),
                           entry.dtype, bytes));
  }
  return entry;
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  const DtypeSize* d = find_dtype(dtype);
  if (!d) throw InputError(fmt::format("unknown safetensors dtype '{}' (known: {})", dtype, safetensors_dtype_names()));
  return d->size;
}

std::string safetensors_dtype_names() {
  std::string out;
  for (const auto& d : kDtypeSizes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size, const std::string& origin) {
  if (size < 8) bad_file(origin, fmt::format("only {} bytes: too short for the 8-byte header length", size));
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | bytes[i];
  if (header_length > size - 8) {
    bad_file(origin, fmt::format("header length {} exceeds the {} bytes after the length field "
                                 "(truncated or not a safetensors file)",
                                 header_length, size - 8));
  }
  if (header_length > kMaxHeaderBytes) {
    bad_file(origin, fmt::format("header length {} is above the {}-byte limit", header_length, kMaxHeaderBytes));
  }
  if (header_length < 2 || bytes[8] != '{') bad_file(origin, "header does not start with '{' (not a safetensors file)");
  SafetensorsHeader header;
  header.data_start = 8 + header_length;
  const uint64_t data_size = size - header.data_start;

  // Parse with a callback that catches duplicate top-level names, which a plain parse would
  // silently collapse into one, and refuses nesting no header has.
  std::set<std::string> top_level_keys;
  std::string duplicate;
  bool too_deep = false;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) too_deep = true;
    if (depth == 1 && event == json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      if (!top_level_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json root;
  try {
    const char* begin = reinterpret_cast<const char*>(bytes + 8);
    root = json::parse(begin, begin + header_length, on_event);
  } catch (const json::exception& e) {
    bad_file(origin, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (too_deep) bad_file(origin, fmt::format("header nests JSON deeper than {} levels", kMaxJsonDepth));
  if (!duplicate.empty()) bad_tensor(origin, duplicate, "name appears twice in the header");
  if (!root.is_object()) bad_file(origin, "header is not a JSON object");

  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad_file(origin, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad_file(origin, fmt::format("__metadata__ value of '{}' is not a string", k));
        header.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    header.entries.push_back(parse_entry(name, value, origin));
  }
  auto& entries = header.entries;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.data_begin, a.data_end) < std::tie(b.data_begin, b.data_end);
  });
  uint64_t expected_begin = 0;
  for (const auto& e : entries) {
    if (e.data_begin != expected_begin) {
      bad_tensor(origin, e.name,
                 e.data_begin < expected_begin
                     ? fmt::format("data_offsets [{}, {}] overlap the previous tensor (ends at {})", e.data_begin,
                                   e.data_end, expected_begin)
                     : fmt::format("data_offsets [{}, {}] leave a gap after byte {}", e.data_begin, e.data_end,
                                   expected_begin));
    }
    if (e.data_end > data_size) {
      bad_tensor(origin, e.name,
                 fmt::format("data_offsets [{}, {}] run past the {}-byte data buffer (truncated file?)",
                             e.data_begin, e.data_end, data_size));
    }
    expected_begin = e.data_end;
  }
  if (expected_begin != data_size) {
    bad_file(origin, fmt::format("tensors cover {} bytes but the data buffer holds {}", expected_begin, data_size));
  }
  for (const auto& e : entries) {
    if (e.dtype != "BOOL") continue;
    const uint8_t* p = bytes + header.data_start + e.data_begin;
    for (uint64_t i = 0; i < e.data_end - e.data_begin; ++i) {
      if (p[i] > 1) bad_tensor(origin, e.name, fmt::format("BOOL byte {} holds {}, not 0 or 1", i, p[i]));
    }
  }
  return header;
}

}  // namespace crl::policy
