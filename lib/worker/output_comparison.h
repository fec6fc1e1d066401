// Compares a candidate's outputs with the reference's: count, shape, dtype, device, then values
// with per-dtype tolerances; reports the worst element so a mismatch can be understood.
#pragma once

#include <ATen/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "program/tolerance.h"

namespace crl::worker {

// Tolerances are the task format's (program/tolerance.h: crl::Tolerance, crl::default_tolerance).
using Tolerance = crl::Tolerance;

// An output as the judge sees it: the values (where they live: the CPU, or the GPU that the
// judge compares on) and the device the program returned it on.
struct ProgramOutput {
  at::Tensor values;
  std::string device;  // "cpu" or "cuda", the device the program returned the tensor on
  // A reference's float32 output only (float64_reference.h): its error against the float64 reference
  // and the scale of the error float32 may make (bfloat16, same shape, where `values` lives).
  // Undefined: no float64 reference.
  at::Tensor float64_delta, float64_scale;
};

struct ComparisonResult {
  bool ok = false;
  std::string message;          // empty when ok; else what differs, naming the output index
  int output_index = -1;        // the first output that differs, -1 when ok or counts differ
  int64_t worst_index = -1;     // flat index of the element furthest outside its tolerance
  double worst_reference = 0;   // its values
  double worst_candidate = 0;
  double max_abs_error = 0;     // over every compared element of every output
  int64_t mismatched_elements = 0;
  // The largest, over outputs with a float64 reference, of the candidate's summed error against it
  // over the float32 reference's own (plus float32 rounding): at most kPrecisionFactor passes. -1: none.
  double precision_ratio = -1;
};

using ToleranceForDtype = std::function<Tolerance(at::ScalarType)>;

// `tolerance_for` gives each output's tolerance from its dtype (the task spec's, when it has one).
// NaN in the candidate where the reference is not NaN (and the reverse) is a mismatch;
// infinities must match exactly. A reference output with a float64_delta is held to the precision
// contract (compare_rule.h): each element within the tolerance of the float64 reference, widened by
// kPrecisionFactor times the float32 reference's own error there, and the output's precision ratio
// at most kPrecisionFactor (a mismatch that says so).
ComparisonResult compare_outputs(const std::vector<ProgramOutput>& reference,
                                 const std::vector<ProgramOutput>& candidate,
                                 const ToleranceForDtype& tolerance_for = default_tolerance);

// Whether a program that computed only the first sample (index 0 along dim 0 of every output
// with two or more) and copied it across the batch would match these reference outputs. False
// when no output has a batch. The per-sample guard runs only where this is true: elsewhere the
// trials already catch copying, and scaling inputs apart could push tasks with narrow input
// ranges (a long cumulative product) to overflow at slightly different places.
bool batch_copy_would_pass(const std::vector<ProgramOutput>& outputs, const ToleranceForDtype& tolerance_for);

// Whether two tensors on one device have the same sizes and dtype and hold the same bytes in value
// order (input checks: a candidate's input after its call against the judge's copy; the guards'
// probes). On the GPU in one pass with 4 bytes of temporaries: ATen's equal makes a bool tensor of
// the inputs' size (a 17 GB input at full scale), which a judge's share of memory may not hold.
// A GPU tensor and a host copy are compared 256 MiB at a time; other device pairs throw Error.
bool same_bytes(const at::Tensor& a, const at::Tensor& b);

}  // namespace crl::worker
