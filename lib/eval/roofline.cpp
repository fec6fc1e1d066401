// The roofline table: datasheet peaks per GPU model (HBM bytes/s, dense bf16 flop/s).
#include "eval/roofline.h"

#include <algorithm>
#include <array>

namespace crl::eval {

std::optional<DevicePeaks> peaks_for_device(const std::string& device_name) {
  struct Row {
    const char* key;  // a substring of the CUDA device name
    double bytes_per_second;
    double flops_per_second;
  };
  // Most specific first: "H100 PCIe" before "H100".
  static const std::array<Row, 9> rows = {{
      {"H200", 4.8e12, 989e12},
      {"H100 PCIe", 2.0e12, 756e12},
      {"H100", 3.35e12, 989e12},
      {"GH200", 4.0e12, 989e12},
      {"B200", 8.0e12, 2250e12},
      {"A100-SXM4-80GB", 2.04e12, 312e12},
      {"A100", 1.56e12, 312e12},
      {"L40S", 0.864e12, 362e12},
      {"L40", 0.864e12, 181e12},
  }};
  for (const auto& row : rows) {
    if (device_name.find(row.key) != std::string::npos) return DevicePeaks{row.key, row.bytes_per_second, row.flops_per_second};
  }
  return std::nullopt;
}

double roofline_seconds(double bytes, double flops, const DevicePeaks& peaks, double margin) {
  margin = std::max(margin, 1.0);
  const double memory = peaks.bytes_per_second > 0 ? bytes / (peaks.bytes_per_second * margin) : 0;
  const double compute = peaks.flops_per_second > 0 ? flops / (peaks.flops_per_second * margin) : 0;
  return std::max(memory, compute);
}

}  // namespace crl::eval
