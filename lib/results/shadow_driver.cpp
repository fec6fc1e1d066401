// An HDF5 virtual file driver that does sec2's POSIX I/O on a ShadowedFile's shadow and reports
// what it writes (see shadow_driver.h). HDF5 calls these under its own lock, one at a time.
#include "results/shadow_driver.h"

#include <H5FDpublic.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "results/hdf5_check.h"

namespace crl::results::detail {
namespace {

// What H5Pset_driver copies into a property list: the file the driver works on.
struct DriverInfo {
  ShadowedFile* file;
};

struct DriverFile {
  H5FD_t pub;  // first: HDF5 hands the driver this pointer back
  ShadowedFile* file = nullptr;
  haddr_t eoa = 0;
  haddr_t eof = 0;
  int handle_fd = -1;  // for H5Fget_vfd_handle
};

// As sec2: the largest address an off_t reaches.
constexpr haddr_t kMaxAddress = (static_cast<haddr_t>(1) << (8 * sizeof(off_t) - 1)) - 1;

herr_t fail(const char* function, hid_t minor, const char* what, int err) {
  H5Epush2(H5E_DEFAULT, __FILE__, function, __LINE__, H5E_ERR_CLS, H5E_VFL, minor, "%s: %s", what,
           err != 0 ? std::strerror(err) : "bad request");
  return -1;
}

bool outside(haddr_t addr, size_t size, haddr_t eoa) {
  return addr == HADDR_UNDEF || addr > kMaxAddress || size > kMaxAddress - addr || addr + size > eoa;
}

void* info_copy(const void* info) {
  auto* copy = static_cast<DriverInfo*>(std::malloc(sizeof(DriverInfo)));
  if (copy != nullptr) std::memcpy(copy, info, sizeof(DriverInfo));
  return copy;
}

herr_t info_free(void* info) {
  std::free(info);
  return 0;
}

void* info_get(H5FD_t* file) {
  const DriverInfo info{reinterpret_cast<DriverFile*>(file)->file};
  return info_copy(&info);
}

H5FD_t* open_file(const char*, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
  if (info == nullptr || info->file == nullptr) {
    fail("open_file", H5E_CANTOPENFILE, "the crl shadow driver needs its ShadowedFile", 0);
    return nullptr;
  }
  if (maxaddr == 0 || maxaddr > kMaxAddress) {
    fail("open_file", H5E_CANTOPENFILE, "bad maximum address", 0);
    return nullptr;
  }
  ShadowedFile& shadow = *info->file;
  if ((flags & H5F_ACC_TRUNC) != 0) {
    // H5Fcreate of a new file: its shadow is empty already; keep the promise anyway.
    if (::ftruncate(shadow.fd(), 0) != 0) {
      fail("open_file", H5E_CANTOPENFILE, "cannot truncate the shadow", errno);
      return nullptr;
    }
    shadow.resized();
  }
  struct stat st {};
  if (::fstat(shadow.fd(), &st) != 0) {
    fail("open_file", H5E_CANTOPENFILE, "cannot stat the shadow", errno);
    return nullptr;
  }
  auto* file = new (std::nothrow) DriverFile{};
  if (file == nullptr) {
    fail("open_file", H5E_CANTOPENFILE, "out of memory", ENOMEM);
    return nullptr;
  }
  file->file = &shadow;
  file->eof = static_cast<haddr_t>(st.st_size);
  shadow.driver_opened();
  return &file->pub;
}

herr_t close_file(H5FD_t* pub) {
  auto* file = reinterpret_cast<DriverFile*>(pub);
  file->file->driver_closed();
  delete file;
  return 0;
}

int driver_compare(const H5FD_t* a, const H5FD_t* b) {
  const auto* x = reinterpret_cast<const DriverFile*>(a)->file;
  const auto* y = reinterpret_cast<const DriverFile*>(b)->file;
  return x < y ? -1 : x > y ? 1 : 0;
}

herr_t driver_query(const H5FD_t*, unsigned long* flags) {
  // sec2's features (HDF5 gathers small metadata and raw data writes), less SWMR and less
  // POSIX_COMPAT_HANDLE: with it HDF5 lstat()s the file's name to resolve links, and a new file's
  // name does not exist until its first commit.
  *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
           H5FD_FEAT_AGGREGATE_SMALLDATA;
#ifdef H5FD_FEAT_DEFAULT_VFD_COMPATIBLE
  *flags |= H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
#endif
  return 0;
}

haddr_t driver_get_eoa(const H5FD_t* pub, H5FD_mem_t) { return reinterpret_cast<const DriverFile*>(pub)->eoa; }

herr_t driver_set_eoa(H5FD_t* pub, H5FD_mem_t, haddr_t addr) {
  reinterpret_cast<DriverFile*>(pub)->eoa = addr;
  return 0;
}

haddr_t driver_get_eof(const H5FD_t* pub, H5FD_mem_t) { return reinterpret_cast<const DriverFile*>(pub)->eof; }

herr_t driver_get_handle(H5FD_t* pub, hid_t, void** handle) {
  auto* file = reinterpret_cast<DriverFile*>(pub);
  file->handle_fd = file->file->fd();
  *handle = &file->handle_fd;
  return 0;
}

herr_t driver_read(H5FD_t* pub, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buffer) {
  auto* file = reinterpret_cast<DriverFile*>(pub);
  if (outside(addr, size, file->eoa)) return fail("driver_read", H5E_OVERFLOW, "read past the end of the allocated file", 0);
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::pread(file->file->fd(), out, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("driver_read", H5E_READERROR, "pread of the shadow failed", errno);
    if (n == 0) {  // past the end of the file: zeros, as sec2 reads them
      std::memset(out, 0, size);
      break;
    }
    out += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}

herr_t driver_write(H5FD_t* pub, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buffer) {
  auto* file = reinterpret_cast<DriverFile*>(pub);
  if (outside(addr, size, file->eoa)) return fail("driver_write", H5E_OVERFLOW, "write past the end of the allocated file", 0);
  file->file->wrote(addr, size);  // before the bytes: a failed write must still reach the next shadow
  const auto* in = static_cast<const unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::pwrite(file->file->fd(), in, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      file->file->failed();
      return fail("driver_write", H5E_WRITEERROR, "pwrite of the shadow failed", err);
    }
    in += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  if (addr > file->eof) file->eof = addr;
  return 0;
}

herr_t driver_truncate(H5FD_t* pub, hid_t, hbool_t) {
  auto* file = reinterpret_cast<DriverFile*>(pub);
  if (file->eoa == file->eof) return 0;
  if (::ftruncate(file->file->fd(), static_cast<off_t>(file->eoa)) != 0) {
    const int err = errno;
    file->file->failed();
    return fail("driver_truncate", H5E_SEEKERROR, "ftruncate of the shadow failed", err);
  }
  file->eof = file->eoa;
  file->file->resized();
  return 0;
}

hid_t driver_id() {
  static hid_t id = H5I_INVALID_HID;
  static std::once_flag once;
  std::call_once(once, [] {
    static H5FD_class_t cls{};
#ifdef H5FD_CLASS_VERSION
    cls.version = H5FD_CLASS_VERSION;
#endif
    cls.name = "crl_shadow";
    cls.maxaddr = kMaxAddress;
    cls.fc_degree = H5F_CLOSE_WEAK;
    cls.fapl_size = sizeof(DriverInfo);
    cls.fapl_get = info_get;
    cls.fapl_copy = info_copy;
    cls.fapl_free = info_free;
    cls.open = open_file;
    cls.close = close_file;
    cls.cmp = driver_compare;
    cls.query = driver_query;
    cls.get_eoa = driver_get_eoa;
    cls.set_eoa = driver_set_eoa;
    cls.get_eof = driver_get_eof;
    cls.get_handle = driver_get_handle;
    cls.read = driver_read;
    cls.write = driver_write;
    cls.truncate = driver_truncate;
    const H5FD_mem_t dichotomy[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
    for (int i = 0; i < H5FD_MEM_NTYPES; ++i) cls.fl_map[i] = dichotomy[i];
    id = CRL_H5_CHECK(H5FDregister(&cls));
  });
  return id;
}

}  // namespace

Hdf5PropertyList shadow_file_access(ShadowedFile& file) {
  Hdf5PropertyList fapl(CRL_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  CRL_H5_CHECK(H5Pset_file_locking(fapl.id(), false, true));
  const DriverInfo info{&file};
  CRL_H5_CHECK(H5Pset_driver(fapl.id(), driver_id(), &info));
  return fapl;
}

}  // namespace crl::results::detail
