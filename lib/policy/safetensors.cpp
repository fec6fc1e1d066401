// safetensors reading (mmap, validated header) and atomic writing; see safetensors.h.
#include "policy/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace crl::policy {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  size_t size;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", 8, at::kDouble},         {"F32", 4, at::kFloat},
    {"F16", 2, at::kHalf},           {"BF16", 2, at::kBFloat16},
    {"I64", 8, at::kLong},           {"I32", 4, at::kInt},
    {"I16", 2, at::kShort},          {"I8", 1, at::kChar},
    {"U8", 1, at::kByte},            {"BOOL", 1, at::kBool},
    {"U16", 2, at::kUInt16},         {"U32", 4, at::kUInt32},
    {"U64", 8, at::kUInt64},         {"F8_E4M3", 1, at::kFloat8_e4m3fn},
    {"F8_E5M2", 1, at::kFloat8_e5m2}, {"F8_E8M0", 1, at::kFloat8_e8m0fnu},
    {"C64", 8, at::kComplexFloat},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string known_dtype_list() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& what) {
  throw InputError(fmt::format("safetensors file {}: {}", path.string(), what));
}

[[noreturn]] void bad_tensor(const std::filesystem::path& path, const std::string& name,
                             const std::string& what) {
  throw InputError(fmt::format("safetensors file {}, tensor '{}': {}", path.string(), name, what));
}

// n * m, or nullopt on overflow of uint64.
bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  out = a * b;
  return true;
}

uint64_t json_uint(const json& value, const std::filesystem::path& path, const std::string& name,
                   const char* field) {
  if (!value.is_number_integer() || (value.is_number_integer() && !value.is_number_unsigned() &&
                                     value.get<int64_t>() < 0)) {
    bad_tensor(path, name, fmt::format("{} must hold non-negative integers, got {}", field,
                                       value.dump()));
  }
  return value.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& value,
                             const std::filesystem::path& path) {
  if (name.empty()) bad_file(path, "a tensor has an empty name");
  if (!value.is_object()) bad_tensor(path, name, "header entry is not a JSON object");
  SafetensorsEntry entry;
  entry.name = name;
  for (const auto& [key, field] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      bad_tensor(path, name, fmt::format("unknown header field '{}'", key));
    }
  }
  if (!value.contains("dtype") || !value["dtype"].is_string()) {
    bad_tensor(path, name, "missing or non-string 'dtype'");
  }
  entry.dtype = value["dtype"].get<std::string>();
  if (!find_dtype(entry.dtype)) {
    bad_tensor(path, name,
               fmt::format("unknown dtype '{}' (known: {})", entry.dtype, known_dtype_list()));
  }
  if (!value.contains("shape") || !value["shape"].is_array()) {
    bad_tensor(path, name, "missing or non-array 'shape'");
  }
  for (const auto& dim : value["shape"]) {
    const uint64_t d = json_uint(dim, path, name, "shape");
    if (d > static_cast<uint64_t>(INT64_MAX)) bad_tensor(path, name, "shape dimension too large");
    entry.shape.push_back(static_cast<int64_t>(d));
  }
  if (!value.contains("data_offsets") || !value["data_offsets"].is_array() ||
      value["data_offsets"].size() != 2) {
    bad_tensor(path, name, "'data_offsets' must be an array [begin, end]");
  }
  entry.data_begin = json_uint(value["data_offsets"][0], path, name, "data_offsets");
  entry.data_end = json_uint(value["data_offsets"][1], path, name, "data_offsets");
  if (entry.data_end < entry.data_begin) {
    bad_tensor(path, name, fmt::format("data_offsets [{}, {}] end before they begin",
                                       entry.data_begin, entry.data_end));
  }
  uint64_t bytes = safetensors_dtype_size(entry.dtype);
  for (int64_t d : entry.shape) {
    if (!checked_mul(bytes, static_cast<uint64_t>(d), bytes)) {
      bad_tensor(path, name, "shape x dtype size overflows");
    }
  }
  if (bytes != entry.data_end - entry.data_begin) {
    bad_tensor(path, name,
               fmt::format("data_offsets [{}, {}] span {} bytes, but shape [{}] of {} needs {}",
                           entry.data_begin, entry.data_end, entry.data_end - entry.data_begin,
                           fmt::join(entry.shape, ", "), entry.dtype, bytes));
  }
  return entry;
}

std::vector<char> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_io_error("cannot open", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  return {text.begin(), text.end()};
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}


struct PreparedTensor {
  std::string name;
  std::string dtype;
  at::Tensor data;  // CPU, contiguous
  uint64_t bytes = 0;
};

std::vector<PreparedTensor> prepare_tensors(const NamedTensors& tensors,
                                            const std::filesystem::path& path) {
  std::vector<PreparedTensor> out;
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) throw InputError(fmt::format("writing {}: a tensor has an empty name",
                                                   path.string()));
    if (name == "__metadata__") {
      throw InputError(fmt::format("writing {}: '__metadata__' is reserved", path.string()));
    }
    if (!seen.insert(name).second) {
      throw InputError(fmt::format("writing {}: tensor name '{}' appears twice", path.string(),
                                   name));
    }
    if (!tensor.defined()) {
      throw InputError(fmt::format("writing {}: tensor '{}' is undefined", path.string(), name));
    }
    PreparedTensor p;
    p.name = name;
    p.dtype = scalar_type_to_safetensors_dtype(tensor.scalar_type());
    p.data = tensor.detach().to(at::kCPU).contiguous();
    p.bytes = static_cast<uint64_t>(p.data.nbytes());
    out.push_back(std::move(p));
  }
  return out;
}

// Writes one file from prepared tensors: data ordered by element size (largest first) then
// name, as the reference writer does, so every tensor stays aligned to its element size.
void write_prepared(const std::filesystem::path& path, std::vector<const PreparedTensor*> tensors,
                    const std::map<std::string, std::string>& metadata) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto* a, const auto* b) {
    const size_t sa = safetensors_dtype_size(a->dtype), sb = safetensors_dtype_size(b->dtype);
    if (sa != sb) return sa > sb;
    return a->name < b->name;
  });
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const auto* t : tensors) {
    json shape = json::array();
    for (int64_t d : t->data.sizes()) shape.push_back(d);
    header[t->name] = {{"dtype", t->dtype}, {"shape", shape},
                       {"data_offsets", {offset, offset + t->bytes}}};
    offset += t->bytes;
  }
  std::string header_text = header.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t length_le[8];
  const uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) length_le[i] = static_cast<uint8_t>(n >> (8 * i));

  AtomicFileWriter writer(path);
  writer.write(length_le, 8);
  writer.write(header_text);
  for (const auto* t : tensors) {
    if (t->bytes > 0) writer.write(t->data.data_ptr(), t->bytes);
  }
  writer.commit();
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d) {
    throw InputError(fmt::format("unknown safetensors dtype '{}' (known: {})", dtype,
                                 known_dtype_list()));
  }
  return d->size;
}

at::ScalarType safetensors_dtype_to_scalar_type(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d) {
    throw InputError(fmt::format("unknown safetensors dtype '{}' (known: {})", dtype,
                                 known_dtype_list()));
  }
  return d->type;
}

std::string scalar_type_to_safetensors_dtype(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  throw InputError(fmt::format("tensor dtype {} has no safetensors equivalent",
                               c10::toString(type)));
}

// ---------------------------------------------------------------------------------------------
// Reading

struct SafetensorsFile::Mapping {
  void* address = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (address && address != MAP_FAILED) ::munmap(address, length);
  }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io_error("cannot open safetensors file", path.string());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_io_error("cannot stat safetensors file", path.string());
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    bad_file(path, fmt::format("only {} bytes: too short for the 8-byte header length", file_size));
  }
  mapping_ = std::make_shared<Mapping>();
  mapping_->length = file_size;
  // Private and writable: tensors handed out may be written to without touching the file.
  mapping_->address = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_->address == MAP_FAILED) {
    mapping_->address = nullptr;
    throw_io_error("cannot mmap safetensors file", path.string());
  }
  const auto* bytes = static_cast<const uint8_t*>(mapping_->address);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | bytes[i];
  if (header_length > file_size - 8) {
    bad_file(path, fmt::format("header length {} exceeds the {} bytes after the length field "
                               "(truncated or not a safetensors file)",
                               header_length, file_size - 8));
  }
  if (header_length > kMaxHeaderBytes) {
    bad_file(path, fmt::format("header length {} is above the {}-byte limit", header_length,
                               kMaxHeaderBytes));
  }
  if (header_length < 2 || bytes[8] != '{') {
    bad_file(path, "header does not start with '{' (not a safetensors file)");
  }
  data_start_ = 8 + header_length;
  const uint64_t data_size = file_size - data_start_;

  // Parse with a callback that catches duplicate top-level names, which a plain parse would
  // silently collapse into one.
  std::set<std::string> top_level_keys;
  std::string duplicate;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      if (!top_level_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    const char* begin = reinterpret_cast<const char*>(bytes + 8);
    header = json::parse(begin, begin + header_length, on_event);
  } catch (const json::exception& e) {
    bad_file(path, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!duplicate.empty()) bad_tensor(path, duplicate, "name appears twice in the header");
  if (!header.is_object()) bad_file(path, "header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad_file(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          bad_file(path, fmt::format("__metadata__ value of '{}' is not a string", k));
        }
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    entries_.push_back(parse_entry(name, value, path));
  }
  std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.data_begin, a.data_end) < std::tie(b.data_begin, b.data_end);
  });
  uint64_t expected_begin = 0;
  for (const auto& e : entries_) {
    if (e.data_begin != expected_begin) {
      bad_tensor(path, e.name,
                 e.data_begin < expected_begin
                     ? fmt::format("data_offsets [{}, {}] overlap the previous tensor (ends at {})",
                                   e.data_begin, e.data_end, expected_begin)
                     : fmt::format("data_offsets [{}, {}] leave a gap after byte {}",
                                   e.data_begin, e.data_end, expected_begin));
    }
    if (e.data_end > data_size) {
      bad_tensor(path, e.name,
                 fmt::format("data_offsets [{}, {}] run past the {}-byte data buffer (truncated "
                             "file?)",
                             e.data_begin, e.data_end, data_size));
    }
    expected_begin = e.data_end;
  }
  if (expected_begin != data_size) {
    bad_file(path, fmt::format("tensors cover {} bytes but the data buffer holds {}",
                               expected_begin, data_size));
  }
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
  for (const auto& e : entries_) {
    if (e.dtype != "BOOL") continue;
    const uint8_t* p = bytes + data_start_ + e.data_begin;
    for (uint64_t i = 0; i < e.data_end - e.data_begin; ++i) {
      if (p[i] > 1) {
        bad_tensor(path, e.name, fmt::format("BOOL byte {} holds {}, not 0 or 1", i, p[i]));
      }
    }
  }
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) bad_tensor(path_, name, "no such tensor");
  return entries_[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const DtypeInfo* d = find_dtype(e.dtype);
  const auto options = at::TensorOptions().dtype(d->type).device(at::kCPU);
  const uint64_t file_offset = data_start_ + e.data_begin;
  auto* data = static_cast<uint8_t*>(mapping_->address) + file_offset;
  if (file_offset % d->size != 0) {
    // Unaligned data (allowed by the format, never made by the reference writer): copy it.
    at::Tensor copy = at::empty(e.shape, options);
    if (e.data_end > e.data_begin) std::memcpy(copy.data_ptr(), data, e.data_end - e.data_begin);
    return copy;
  }
  std::shared_ptr<Mapping> keep_alive = mapping_;
  return at::from_blob(
      data, e.shape, [keep_alive](void*) mutable { keep_alive.reset(); }, options);
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::filesystem::path& path) : source_(path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path)) {
    if (std::filesystem::exists(path / "model.safetensors.index.json")) {
      file = path / "model.safetensors.index.json";
    } else if (std::filesystem::exists(path / "model.safetensors")) {
      file = path / "model.safetensors";
    } else {
      throw InputError(fmt::format("checkpoint directory {} holds neither "
                                   "model.safetensors.index.json nor model.safetensors",
                                   path.string()));
    }
  }
  if (file.extension() != ".json") {
    shards_.push_back(std::make_unique<SafetensorsFile>(file));
    for (const auto& e : shards_[0]->entries()) shard_of_[e.name] = 0;
    return;
  }
  const std::vector<char> text = read_whole_file(file);
  json index;
  try {
    index = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InputError(fmt::format("safetensors index {}: not valid JSON: {}", file.string(),
                                 e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw InputError(fmt::format("safetensors index {}: missing the 'weight_map' object",
                                 file.string()));
  }
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard_value] : index["weight_map"].items()) {
    if (!shard_value.is_string()) {
      throw InputError(fmt::format("safetensors index {}: weight_map['{}'] is not a string",
                                   file.string(), name));
    }
    const std::string shard_name = shard_value.get<std::string>();
    if (!is_plain_file_name(shard_name)) {
      throw InputError(fmt::format("safetensors index {}: weight_map['{}'] = '{}' is not a plain "
                                   "file name in the checkpoint's directory",
                                   file.string(), name, shard_name));
    }
    auto it = shard_index.find(shard_name);
    if (it == shard_index.end()) {
      shards_.push_back(std::make_unique<SafetensorsFile>(file.parent_path() / shard_name));
      it = shard_index.emplace(shard_name, shards_.size() - 1).first;
    }
    if (!shards_[it->second]->contains(name)) {
      throw InputError(fmt::format("safetensors index {}: tensor '{}' is mapped to {}, which does "
                                   "not hold it",
                                   file.string(), name, shard_name));
    }
    shard_of_[name] = it->second;
  }
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(shard_of_.size());
  for (const auto& [name, shard] : shard_of_) out.push_back(name);
  return out;
}

const SafetensorsEntry& SafetensorsCheckpoint::entry(const std::string& name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    throw InputError(fmt::format("checkpoint {}: no tensor named '{}'", source_.string(), name));
  }
  return shards_[it->second]->entry(name);
}

at::Tensor SafetensorsCheckpoint::tensor(const std::string& name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    throw InputError(fmt::format("checkpoint {}: no tensor named '{}'", source_.string(), name));
  }
  return shards_[it->second]->tensor(name);
}

std::map<std::string, at::Tensor> SafetensorsCheckpoint::load_all() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, shard] : shard_of_) out[name] = shards_[shard]->tensor(name);
  return out;
}

std::map<std::string, std::string> SafetensorsCheckpoint::metadata() const {
  std::map<std::string, std::string> out;
  for (const auto& shard : shards_) {
    for (const auto& [k, v] : shard->metadata()) out.emplace(k, v);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<PreparedTensor> prepared = prepare_tensors(tensors, path);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) throw IoError(fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  }
  std::vector<const PreparedTensor*> pointers;
  for (const auto& p : prepared) pointers.push_back(&p);
  write_prepared(path, pointers, metadata);
}

void write_sharded_safetensors(const std::filesystem::path& directory, const NamedTensors& tensors,
                               uint64_t max_shard_bytes,
                               const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) {
    throw InputError(fmt::format("writing {}: max_shard_bytes must be positive",
                                 directory.string()));
  }
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) throw IoError(fmt::format("cannot create {}: {}", directory.string(), ec.message()));
  const std::vector<PreparedTensor> prepared = prepare_tensors(tensors, directory);
  std::vector<std::vector<const PreparedTensor*>> shards;
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& p : prepared) {
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + p.bytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&p);
    shard_bytes += p.bytes;
    total_bytes += p.bytes;
  }
  if (shards.empty()) shards.emplace_back();
  json weight_map = json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_prepared(directory / name, shards[i], metadata);
    for (const auto* p : shards[i]) weight_map[p->name] = name;
  }
  const json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  write_file_atomically(directory / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace crl::policy
