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
#include "core/json_bounded.h"
#include "core/read_file.h"

namespace crl::policy {
namespace {

using nlohmann::json;

// The ATen type of each safetensors dtype (their sizes: safetensors_header.cpp).
struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble},         {"F32", at::kFloat},
    {"F16", at::kHalf},           {"BF16", at::kBFloat16},
    {"I64", at::kLong},           {"I32", at::kInt},
    {"I16", at::kShort},          {"I8", at::kChar},
    {"U8", at::kByte},            {"BOOL", at::kBool},
    {"U16", at::kUInt16},         {"U32", at::kUInt32},
    {"U64", at::kUInt64},         {"F8_E4M3", at::kFloat8_e4m3fn},
    {"F8_E5M2", at::kFloat8_e5m2}, {"F8_E8M0", at::kFloat8_e8m0fnu},
    {"C64", at::kComplexFloat},
};

const DtypeInfo* find_dtype_info(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
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

at::ScalarType safetensors_dtype_to_scalar_type(const std::string& dtype) {
  const DtypeInfo* d = find_dtype_info(dtype);
  if (!d) {
    throw InputError(fmt::format("unknown safetensors dtype '{}' (known: {})", dtype,
                                 safetensors_dtype_names()));
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
    throw InputError(fmt::format("safetensors file {}: only {} bytes: too short for the 8-byte header length",
                                 path.string(), file_size));
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
  SafetensorsHeader header =
      parse_safetensors_header(static_cast<const uint8_t*>(mapping_->address), file_size, path.string());
  data_start_ = header.data_start;
  entries_ = std::move(header.entries);
  metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw InputError(fmt::format("safetensors file {}, tensor '{}': no such tensor", path_.string(), name));
  return entries_[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const DtypeInfo* d = find_dtype_info(e.dtype);
  const auto options = at::TensorOptions().dtype(d->type).device(at::kCPU);
  const uint64_t file_offset = data_start_ + e.data_begin;
  auto* data = static_cast<uint8_t*>(mapping_->address) + file_offset;
  if (file_offset % safetensors_dtype_size(e.dtype) != 0) {
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
  const std::string text = read_file(file, "safetensors index");
  json index = parse_json_bounded(text, fmt::format("safetensors index {}", file.string()));
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
    if (ec) throw IoError(fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()), ec.value());
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
  if (ec) throw IoError(fmt::format("cannot create {}: {}", directory.string(), ec.message()), ec.value());
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
