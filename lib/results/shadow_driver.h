// The HDF5 file driver (VFD) of ResultsWriter: POSIX I/O like HDF5's sec2 driver, on the shadow
// of a ShadowedFile, telling it every byte range written so that a commit can bring the next
// shadow up to date. The file format is HDF5's own (no driver info in the superblock): any HDF5
// reader (h5py, ResultsReader) opens the committed file with the default driver.
#pragma once

#include "results/hdf5_handle.h"
#include "results/shadowed_file.h"

namespace crl::results::detail {

// A file-access property list whose driver reads and writes `file`'s shadow (HDF5's own file
// locking off, as for every crl writer and reader). `file` must outlive every HDF5 file opened
// with it.
Hdf5PropertyList shadow_file_access(ShadowedFile& file);

}  // namespace crl::results::detail
