// The HDF5 calls shared by ResultsWriter and ResultsReader; every call is checked.
#include "results/hdf5_storage.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "results/hdf5_check.h"

namespace crl::results::detail {

Hdf5Datatype string_type() {
  Hdf5Datatype type(CRL_H5_CHECK(H5Tcopy(H5T_C_S1)));
  CRL_H5_CHECK(H5Tset_size(type.id(), H5T_VARIABLE));
  CRL_H5_CHECK(H5Tset_cset(type.id(), H5T_CSET_UTF8));
  return type;
}

Hdf5Datatype bool_type() {
  Hdf5Datatype type(CRL_H5_CHECK(H5Tenum_create(H5T_NATIVE_INT8)));
  const std::int8_t no = 0, yes = 1;
  CRL_H5_CHECK(H5Tenum_insert(type.id(), "FALSE", &no));
  CRL_H5_CHECK(H5Tenum_insert(type.id(), "TRUE", &yes));
  return type;
}

Hdf5Datatype memory_type(ColumnType type) {
  switch (type) {
    case ColumnType::int64:
      return Hdf5Datatype(CRL_H5_CHECK(H5Tcopy(H5T_NATIVE_INT64)));
    case ColumnType::float64:
      return Hdf5Datatype(CRL_H5_CHECK(H5Tcopy(H5T_NATIVE_DOUBLE)));
    case ColumnType::boolean:
      return bool_type();
    case ColumnType::string:
      return string_type();
  }
  throw Error("memory_type: unknown column type");
}

ColumnType column_type_of(hid_t dataset, const std::string& where) {
  Hdf5Datatype type(CRL_H5_CHECK(H5Dget_type(dataset)));
  const H5T_class_t type_class = CRL_H5_CHECK(H5Tget_class(type.id()));
  const std::size_t size = H5Tget_size(type.id());
  if (type_class == H5T_INTEGER && size == 8 && H5Tget_sign(type.id()) == H5T_SGN_2) {
    return ColumnType::int64;
  }
  if (type_class == H5T_FLOAT && size == 8) return ColumnType::float64;
  if (type_class == H5T_ENUM && size == 1) return ColumnType::boolean;
  if (type_class == H5T_STRING && CRL_H5_CHECK(H5Tis_variable_str(type.id())) > 0) {
    return ColumnType::string;
  }
  throw InputError(fmt::format(
      "{} has an HDF5 type crl does not read (class {}, {} bytes); crl columns are int64, "
      "float64, bool (int8 enum) or variable-length strings",
      where, static_cast<int>(type_class), size));
}

namespace {

Hdf5Attribute replace_attribute(hid_t object, const std::string& name, hid_t type, hid_t space) {
  if (CRL_H5_CHECK(H5Aexists(object, name.c_str())) > 0) {
    CRL_H5_CHECK(H5Adelete(object, name.c_str()));
  }
  return Hdf5Attribute(
      CRL_H5_CHECK(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
}

Hdf5Attribute open_attribute(hid_t object, const std::string& name, const std::string& where) {
  if (!has_attribute(object, name)) {
    throw InputError(fmt::format("{} has no attribute '{}'", where, name));
  }
  return Hdf5Attribute(CRL_H5_CHECK(H5Aopen(object, name.c_str(), H5P_DEFAULT)));
}

void require_variable_string(hid_t attribute, const std::string& name, const std::string& where) {
  Hdf5Datatype type(CRL_H5_CHECK(H5Aget_type(attribute)));
  if (CRL_H5_CHECK(H5Tget_class(type.id())) != H5T_STRING ||
      CRL_H5_CHECK(H5Tis_variable_str(type.id())) <= 0) {
    throw InputError(
        fmt::format("attribute '{}' of {} is not a variable-length string", name, where));
  }
}

}  // namespace

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const std::string clean = to_valid_utf8(value);
  const auto type = string_type();
  Hdf5Dataspace space(CRL_H5_CHECK(H5Screate(H5S_SCALAR)));
  auto attribute = replace_attribute(object, name, type.id(), space.id());
  const char* data = clean.c_str();
  CRL_H5_CHECK(H5Awrite(attribute.id(), type.id(), &data));
}

void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values) {
  std::vector<std::string> clean;
  std::vector<const char*> pointers;
  for (const auto& v : values) clean.push_back(to_valid_utf8(v));
  for (const auto& v : clean) pointers.push_back(v.c_str());
  const auto type = string_type();
  const hsize_t count = pointers.size();
  Hdf5Dataspace space(CRL_H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  auto attribute = replace_attribute(object, name, type.id(), space.id());
  CRL_H5_CHECK(H5Awrite(attribute.id(), type.id(), pointers.data()));
}

void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value) {
  Hdf5Dataspace space(CRL_H5_CHECK(H5Screate(H5S_SCALAR)));
  auto attribute = replace_attribute(object, name, H5T_STD_I64LE, space.id());
  CRL_H5_CHECK(H5Awrite(attribute.id(), H5T_NATIVE_INT64, &value));
}

bool has_attribute(hid_t object, const std::string& name) {
  return CRL_H5_CHECK(H5Aexists(object, name.c_str())) > 0;
}

std::string read_string_attribute(hid_t object, const std::string& name, const std::string& where) {
  auto attribute = open_attribute(object, name, where);
  require_variable_string(attribute.id(), name, where);
  Hdf5Dataspace space(CRL_H5_CHECK(H5Aget_space(attribute.id())));
  if (CRL_H5_CHECK(H5Sget_simple_extent_npoints(space.id())) != 1) {
    throw InputError(fmt::format("attribute '{}' of {} is not a single string", name, where));
  }
  const auto type = string_type();
  char* data = nullptr;
  CRL_H5_CHECK(H5Aread(attribute.id(), type.id(), &data));
  std::string value = data ? data : "";
  H5free_memory(data);
  return value;
}

std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name,
                                                    const std::string& where) {
  auto attribute = open_attribute(object, name, where);
  require_variable_string(attribute.id(), name, where);
  Hdf5Dataspace space(CRL_H5_CHECK(H5Aget_space(attribute.id())));
  const auto count = CRL_H5_CHECK(H5Sget_simple_extent_npoints(space.id()));
  std::vector<char*> data(static_cast<std::size_t>(count), nullptr);
  const auto type = string_type();
  CRL_H5_CHECK(H5Aread(attribute.id(), type.id(), data.data()));
  std::vector<std::string> values;
  for (char* p : data) values.emplace_back(p ? p : "");
  CRL_H5_CHECK(H5Dvlen_reclaim(type.id(), space.id(), H5P_DEFAULT, data.data()));
  return values;
}

std::int64_t read_int64_attribute(hid_t object, const std::string& name, const std::string& where) {
  auto attribute = open_attribute(object, name, where);
  Hdf5Datatype type(CRL_H5_CHECK(H5Aget_type(attribute.id())));
  if (CRL_H5_CHECK(H5Tget_class(type.id())) != H5T_INTEGER) {
    throw InputError(fmt::format("attribute '{}' of {} is not an integer", name, where));
  }
  std::int64_t value = 0;
  CRL_H5_CHECK(H5Aread(attribute.id(), H5T_NATIVE_INT64, &value));
  return value;
}

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  const auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  hsize_t index = 0;
  CRL_H5_CHECK(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names));
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> child_names(hid_t group) {
  std::vector<std::string> names;
  const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  hsize_t index = 0;
  CRL_H5_CHECK(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names));
  std::sort(names.begin(), names.end());
  return names;
}

bool has_child(hid_t group, const std::string& name) {
  return CRL_H5_CHECK(H5Lexists(group, name.c_str(), H5P_DEFAULT)) > 0;
}

TableSchema read_schema(hid_t table_group, const std::string& where) {
  TableSchema schema;
  for (const auto& name : read_string_list_attribute(table_group, kColumnsAttribute, where)) {
    // As the writer checks them: a name such as "../meta" must not reach HDF5 as a path.
    try {
      check_result_name("column", name);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} lists a column the writer would refuse: {}", where, e.what()));
    }
    if (!has_child(table_group, name)) {
      throw InputError(
          fmt::format("{} lists column '{}' but has no dataset of that name", where, name));
    }
    Hdf5Dataset dataset(CRL_H5_CHECK(H5Dopen2(table_group, name.c_str(), H5P_DEFAULT)));
    schema.push_back(
        {name, column_type_of(dataset.id(), fmt::format("column '{}' of {}", name, where))});
  }
  return schema;
}

std::string object_name(hid_t id) {
  std::string name(1024, '\0');
  const ssize_t n = H5Iget_name(id, name.data(), name.size());
  name.resize(n > 0 ? std::min<size_t>(static_cast<size_t>(n), name.size() - 1) : 0);
  std::string file(1024, '\0');
  const ssize_t m = H5Fget_name(id, file.data(), file.size());
  file.resize(m > 0 ? std::min<size_t>(static_cast<size_t>(m), file.size() - 1) : 0);
  return fmt::format("'{}' of '{}'", name, file);
}

hsize_t column_length(hid_t dataset) {
  Hdf5Dataspace space(CRL_H5_CHECK(H5Dget_space(dataset)));
  if (CRL_H5_CHECK(H5Sget_simple_extent_ndims(space.id())) != 1) {
    throw InputError(fmt::format("column {} is not one-dimensional", object_name(dataset)));
  }
  hsize_t length = 0;
  CRL_H5_CHECK(H5Sget_simple_extent_dims(space.id(), &length, nullptr));
  // The extent is only a claim: columns are stored uncompressed, so each row takes its element's
  // bytes in the file, and a length the file cannot hold is refused before anything is sized by it.
  Hdf5Datatype type(CRL_H5_CHECK(H5Dget_type(dataset)));
  const hsize_t element_bytes = std::max<hsize_t>(1, H5Tget_size(type.id()));
  Hdf5File file(CRL_H5_CHECK(H5Iget_file_id(dataset)));
  hsize_t file_bytes = 0;
  CRL_H5_CHECK(H5Fget_filesize(file.id(), &file_bytes));
  if (length > file_bytes / element_bytes) {
    throw InputError(fmt::format("column {} claims {} rows of {} bytes, more than its {}-byte file holds "
                                 "(damaged file?)",
                                 object_name(dataset), length, element_bytes, file_bytes));
  }
  return length;
}

ColumnValues read_column_values(hid_t dataset, ColumnType type, hsize_t rows,
                                const std::string& where) {
  const hsize_t stored = column_length(dataset);
  if (rows > stored) {
    throw InputError(
        fmt::format("{} has {} rows, fewer than the {} asked for", where, stored, rows));
  }
  Hdf5Dataspace file_space(CRL_H5_CHECK(H5Dget_space(dataset)));
  Hdf5Dataspace memory_space(CRL_H5_CHECK(H5Screate_simple(1, &rows, nullptr)));
  if (rows == 0) {
    CRL_H5_CHECK(H5Sselect_none(file_space.id()));
    CRL_H5_CHECK(H5Sselect_none(memory_space.id()));
  } else {
    const hsize_t start = 0;
    CRL_H5_CHECK(
        H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &start, nullptr, &rows, nullptr));
  }
  const auto memtype = memory_type(type);
  const auto n = static_cast<std::size_t>(rows);
  const auto read = [&](void* buffer) {
    if (rows == 0) return;
    try {
      CRL_H5_CHECK(
          H5Dread(dataset, memtype.id(), memory_space.id(), file_space.id(), H5P_DEFAULT, buffer));
    } catch (const ApiError& e) {
      throw InputError(fmt::format("cannot read {} (is the file damaged?): {}", where, e.what()));
    }
  };
  switch (type) {
    case ColumnType::int64: {
      std::vector<std::int64_t> values(n);
      read(values.data());
      return values;
    }
    case ColumnType::float64: {
      std::vector<double> values(n);
      read(values.data());
      return values;
    }
    case ColumnType::boolean: {
      std::vector<std::int8_t> raw(n);
      read(raw.data());
      return std::vector<bool>(raw.begin(), raw.end());
    }
    case ColumnType::string: {
      std::vector<char*> raw(n, nullptr);
      read(raw.data());
      std::vector<std::string> values;
      values.reserve(n);
      for (char* p : raw) values.emplace_back(p ? p : "");  // never-written elements are null
      if (rows > 0) {
        CRL_H5_CHECK(H5Dvlen_reclaim(memtype.id(), memory_space.id(), H5P_DEFAULT, raw.data()));
      }
      return values;
    }
  }
  throw Error("read_column_values: unknown column type");
}

Hdf5File open_existing_results_file(const std::string& path, unsigned flags, hid_t fapl) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    // A missing file, a folder on the way that is a file, a loop: the path given is wrong.
    if (is_path_error(errno)) throw InputError(fmt::format("results file '{}': {}", path, std::strerror(errno)));
    throw_io_error("cannot open results file", path);
  }
  if (!S_ISREG(info.st_mode)) {
    throw InputError(fmt::format("results file '{}' is not a regular file{}", path,
                                 S_ISDIR(info.st_mode) ? " (it is a folder)" : ""));
  }
  // HDF5 says only "unable to open" when the OS refuses; ask the OS first, so that a file this
  // user may not read is named as such (bad input, like a missing one).
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::close(fd);
  } else if (is_path_error(errno)) {
    throw InputError(fmt::format("results file '{}': {}", path, std::strerror(errno)));
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0) {
    throw IoError(fmt::format("cannot read results file '{}': {}", path, hdf5_error_stack()));
  }
  if (is_hdf5 == 0) {
    throw InputError(fmt::format(
        "'{}' is not an HDF5 file ({}); crl leaves it untouched: move it away or choose "
        "another results path",
        path, info.st_size == 0 ? "it is empty" : "no HDF5 signature"));
  }
  const hid_t id = H5Fopen(path.c_str(), flags, fapl);
  if (id < 0) {
    throw InputError(fmt::format(
        "'{}' is an HDF5 file that cannot be opened (truncated or damaged?); crl leaves it "
        "untouched. HDF5 says: {}",
        path, hdf5_error_stack()));
  }
  Hdf5File file(id);
  if (!has_attribute(file.id(), kFormatAttribute) ||
      read_string_attribute(file.id(), kFormatAttribute, path) != kFormatName) {
    throw InputError(fmt::format(
        "'{}' is an HDF5 file but not a crl results file (no {}='{}' attribute on /); crl "
        "leaves it untouched",
        path, kFormatAttribute, kFormatName));
  }
  const auto version = read_int64_attribute(file.id(), kFormatVersionAttribute, path);
  if (version > kFormatVersion) {
    throw InputError(fmt::format("'{}' is crl results format version {}; this crl reads up to {}",
                                 path, version, kFormatVersion));
  }
  return file;
}

Hdf5PropertyList file_access_without_hdf5_locking() {
  Hdf5PropertyList fapl(CRL_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  CRL_H5_CHECK(H5Pset_file_locking(fapl.id(), false, true));
  return fapl;
}

}  // namespace crl::results::detail
