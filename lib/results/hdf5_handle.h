// Thin RAII owners for HDF5 handles (file, group, dataset, dataspace, datatype, property list,
// attribute): each closes its id exactly once and can only be moved, never copied.
#pragma once

#include <hdf5.h>

#include <utility>

namespace crl::results {

using Hdf5Closer = herr_t (*)(hid_t);

template <Hdf5Closer close_fn>
class Hdf5Handle {
 public:
  Hdf5Handle() = default;
  // Takes ownership of `id`; pass it straight from a CRL_H5_CHECK'ed create/open call.
  explicit Hdf5Handle(hid_t id) : id_(id) {}
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  // A failing close cannot be reported from a destructor; close_checked() reports it.
  ~Hdf5Handle() { reset(); }

  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    // A close that fails leaves entries on HDF5's error stack; clear them so that they do not
    // show up in the message of a later, unrelated error.
    if (id_ >= 0 && close_fn(id_) < 0) H5Eclear2(H5E_DEFAULT);
    id_ = H5I_INVALID_HID;
  }
  // Gives up ownership without closing (for a handle that must outlive a crash simulation).
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using Hdf5File = Hdf5Handle<H5Fclose>;
using Hdf5Group = Hdf5Handle<H5Gclose>;
using Hdf5Dataset = Hdf5Handle<H5Dclose>;
using Hdf5Dataspace = Hdf5Handle<H5Sclose>;
using Hdf5Datatype = Hdf5Handle<H5Tclose>;
using Hdf5PropertyList = Hdf5Handle<H5Pclose>;
using Hdf5Attribute = Hdf5Handle<H5Aclose>;

}  // namespace crl::results
