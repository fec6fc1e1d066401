// libFuzzer harness: crl results files through ResultsReader (its layout validation, then every
// read a command makes: tables, columns, /meta and its JSON, text stores, the commands' typed
// expectations) and ResultsWriter's reopen. The input is a recipe, not HDF5 bytes: it builds, with
// HDF5's own API, a file whose crl layout is hostile (group kinds, column lists, dtypes, ranks,
// lengths, attribute types, names, bytes of strings), so that the fuzzer explores crl's checks
// rather than HDF5's decoder of damaged bytes. Anything but crl::InputError is a finding.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "results/results_reader.h"
#include "results/results_writer.h"

namespace {

using crl::results::ColumnType;

const char* const kNames[] = {"meta", "text", "rollouts", "verdicts", "steps", "id", "text", "task", "status",
                              "speedup", "rollout_id", "superseded", "candidate", "x", "1st", "a b", ""};

std::string name_from(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(12);
  return kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
}

hid_t vlen_string_type() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

void string_attribute(hid_t object, const std::string& name, const std::vector<std::string>& values, bool scalar) {
  const hid_t type = vlen_string_type();
  const hsize_t n = values.size();
  const hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  std::vector<const char*> pointers;
  for (const auto& v : values) pointers.push_back(v.c_str());
  if (pointers.empty()) pointers.push_back("");
  const hid_t attr = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    H5Awrite(attr, type, pointers.data());
    H5Aclose(attr);
  }
  H5Sclose(space);
  H5Tclose(type);
}

void int_attribute(hid_t object, const std::string& name, std::int64_t value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    H5Awrite(attr, H5T_NATIVE_INT64, &value);
    H5Aclose(attr);
  }
  H5Sclose(space);
}

// An attribute of one of the shapes crl reads or one it must refuse.
void some_attribute(hid_t object, const std::string& name, FuzzedDataProvider& in, const std::string& usual) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0: string_attribute(object, name, {usual}, true); break;
    case 1: string_attribute(object, name, {in.ConsumeRandomLengthString(64)}, true); break;
    case 2: string_attribute(object, name, {usual, in.ConsumeRandomLengthString(8)}, false); break;
    case 3: int_attribute(object, name, in.ConsumeIntegral<std::int64_t>()); break;
    default: break;  // none
  }
}

void column(hid_t group, const std::string& name, FuzzedDataProvider& in) {
  const hsize_t rows = in.ConsumeIntegralInRange<hsize_t>(0, 6);
  const int kind = in.ConsumeIntegralInRange(0, 7);
  hid_t type = -1;
  switch (kind) {
    case 0: type = H5Tcopy(H5T_STD_I64LE); break;
    case 1: type = H5Tcopy(H5T_IEEE_F64LE); break;
    case 2: {
      type = H5Tenum_create(H5T_NATIVE_INT8);
      const std::int8_t no = 0, yes = 1;
      H5Tenum_insert(type, "FALSE", &no);
      H5Tenum_insert(type, "TRUE", &yes);
      break;
    }
    case 3: type = vlen_string_type(); break;
    case 4:  // fixed-length strings
      type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, 4);
      break;
    case 5: type = H5Tcopy(H5T_STD_I32LE); break;
    case 6: type = H5Tcopy(H5T_STD_U64BE); break;
    default: type = H5Tcopy(H5T_STD_I64LE); break;  // 2-D below
  }
  const bool two_d = kind == 7;
  const hsize_t dims[2] = {rows, 2}, max_dims[2] = {H5S_UNLIMITED, 2}, chunk[2] = {4, 2};
  const hid_t space = H5Screate_simple(two_d ? 2 : 1, dims, max_dims);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, two_d ? 2 : 1, chunk);
  const hid_t dataset = H5Dcreate2(group, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dataset >= 0 && rows > 0 && !two_d) {
    if (kind == 3) {
      std::vector<std::string> values;
      std::vector<const char*> pointers;
      for (hsize_t i = 0; i < rows; ++i) values.push_back(in.ConsumeRandomLengthString(40));
      for (const auto& v : values) pointers.push_back(v.c_str());
      H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data());
    } else {
      std::vector<unsigned char> bytes(rows * H5Tget_size(type));
      for (auto& b : bytes) b = in.ConsumeIntegral<unsigned char>();
      if (kind == 2) {
        for (auto& b : bytes) b &= 1;  // an enum holds only its members
      }
      H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    }
  }
  if (dataset >= 0) H5Dclose(dataset);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(type);
}

void table(hid_t parent, const std::string& name, const char* kind, FuzzedDataProvider& in) {
  const hid_t group = H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0) return;
  some_attribute(group, "crl_kind", in, kind);
  std::vector<std::string> names;
  const int columns = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < columns; ++i) names.push_back(name_from(in));
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: string_attribute(group, "crl_columns", names, false); break;
    case 1: string_attribute(group, "crl_columns", names, true); break;
    case 2: int_attribute(group, "crl_columns", columns); break;
    default: break;
  }
  for (const auto& c : names) column(group, c, in);
  if (in.ConsumeBool()) column(group, name_from(in), in);  // perhaps one the list does not name
  H5Gclose(group);
}

void build(const std::string& path, FuzzedDataProvider& in) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return;
  some_attribute(file, "crl_format", in, "crl-results");
  if (in.ConsumeIntegralInRange(0, 3) != 0) {
    int_attribute(file, "crl_format_version", in.ConsumeBool() ? 1 : in.ConsumeIntegral<std::int64_t>());
  } else {
    some_attribute(file, "crl_format_version", in, "1");
  }
  const int objects = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < objects; ++i) {
    const std::string name = name_from(in);
    if (name == "meta") {
      const hid_t meta = H5Gcreate2(file, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (meta < 0) continue;
      const int keys = in.ConsumeIntegralInRange(0, 4);
      for (int k = 0; k < keys; ++k) {
        const std::string key = in.ConsumeBool() ? name_from(in) : (in.ConsumeBool() ? "eval_options" : "earlier_git_commits");
        some_attribute(meta, key, in, in.ConsumeBool() ? "{\"backend\": \"cpu\"}" : "[\"abc\", 1]");
      }
      H5Gclose(meta);
    } else if (name == "text" && in.ConsumeBool()) {
      const hid_t text = H5Gcreate2(file, "text", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (text < 0) continue;
      const int stores = in.ConsumeIntegralInRange(0, 3);
      for (int s = 0; s < stores; ++s) table(text, in.ConsumeBool() ? "programs" : name_from(in), "text", in);
      H5Gclose(text);
    } else if (in.ConsumeIntegralInRange(0, 9) == 0) {
      column(file, name, in);  // a dataset where a group belongs
    } else {
      table(file, name, "table", in);
    }
  }
  H5Fclose(file);
}

// Every read the commands make; only InputError may come out.
void read_all(const std::string& path) {
  const crl::results::ResultsReader reader(path);
  for (const auto& t : reader.tables()) {
    for (const auto& c : reader.schema(t)) reader.column(t, c.name);
    reader.rows(t);
  }
  for (const auto& key : reader.meta_keys()) {
    reader.meta(key);
    try {
      reader.meta_json(key);
    } catch (const crl::InputError&) {
    }
  }
  for (const auto& store : reader.text_stores()) {
    reader.texts(store);
    reader.text(store, 0);
  }
  reader.validate({.tables = {{.table = "rollouts",
                               .columns = {{"task", ColumnType::string}, {"speedup", ColumnType::float64}},
                               .optional = {{"superseded", ColumnType::boolean}}}},
                   .meta = {{.key = "earlier_git_commits", .shape = crl::results::MetaShape::json_string_list},
                            {.key = "eval_options", .shape = crl::results::MetaShape::json_object}}});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("crl_fuzz_results_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  const std::string path = dir + "/fuzzed.h5";
  std::filesystem::remove(path);
  FuzzedDataProvider in(data, size);
  build(path, in);
  try {
    read_all(path);
  } catch (const crl::InputError&) {
  }
  try {
    // Appending: the writer validates the file, then declares, appends and commits.
    crl::results::ResultsWriter writer(path, {.fsync_on_flush = false});
    writer.declare_table("rollouts", {{"task", ColumnType::string}, {"speedup", ColumnType::float64}});
    crl::results::RowBatch batch({{"task", ColumnType::string}, {"speedup", ColumnType::float64}});
    batch.add_row({std::string("t"), 1.0});
    writer.append("rollouts", batch);
    writer.close();
    read_all(path);  // what it wrote reads back
  } catch (const crl::InputError&) {
  }
  return 0;
}
