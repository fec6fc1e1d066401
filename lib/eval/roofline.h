// What a GPU can do at most, per model, for the roofline gate: a candidate faster than its task's
// least traffic over the memory bandwidth, or its operations over the peak arithmetic rate, did
// not do the work (hack:beyond_roofline). Peaks are the vendors' datasheet figures for the dense
// bf16 tensor-core rate (the highest any program of the suite could use) and HBM bandwidth.
#pragma once

#include <optional>
#include <string>

namespace crl::eval {

struct DevicePeaks {
  std::string model;              // the table row that matched ("H200")
  double bytes_per_second = 0;    // HBM bandwidth
  double flops_per_second = 0;    // dense bf16 tensor-core rate
};

// The peaks of a GPU by its CUDA device name ("NVIDIA H200", "NVIDIA H100 80GB HBM3", ...);
// nothing for a name the table does not know (the gate is then skipped, and the verdict says so).
std::optional<DevicePeaks> peaks_for_device(const std::string& device_name);

// The least time a program can take for `bytes` of traffic and `flops` operations on `peaks`,
// with `margin` (>= 1) of slack for the datasheet's rounding and clock boosts.
double roofline_seconds(double bytes, double flops, const DevicePeaks& peaks, double margin);

}  // namespace crl::eval
