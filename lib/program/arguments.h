// Making a task's forward arguments (inputs, then params) from a seed, directly on the device.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "program/task_spec.h"

namespace crl {

// The forward arguments of `spec` at `scale`: every input, then every param, with the spec's
// shapes, dtypes, init and post ops, generated on `device` (no host round trip: full-scale
// tensors can be gigabytes). Deterministic for a (seed, device type) pair. Each tensor draws from
// its own generator, seeded from (seed, inputs or params, index within that list), so adding a
// param changes no input and adding an input changes no param.
std::vector<at::Tensor> make_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed,
                                       const at::Device& device);

// One tensor of the spec, as make_arguments makes it (for tools that need a single argument).
// With `into` (a contiguous tensor of the argument's shape and dtype) the values are written there
// and `into` is returned: the same values, without a second tensor's memory (the hack guards write
// new values at the same addresses; at full scale an input is up to 16 GiB).
at::Tensor make_argument(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale,
                         uint64_t stream_seed, const at::Device& device, at::Tensor into = {});

// make_arguments(spec, scale, seed, ...)'s values written into `args` (as make_argument's `into`).
void fill_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed, const std::vector<at::Tensor>& args);

// For the evaluator's per-sample guard: multiplies sample b (index b along dim 0) of every input
// that is continuously random (randn, rand, uniform, normal, uniform_fan_in; floating; no tril,
// triu, symmetric or softmax post op, whose structure a candidate may rely on) and has at least
// two samples by its own factor, evenly spaced over [0.9, 1.1]. Outputs that reduce over a sample
// then differ between samples by far more than any tolerance, so a program that computes one
// sample and copies it across the batch is caught even where the task's own inputs give every
// sample nearly the same result. Params are left alone. Returns how many inputs it scaled.
size_t spread_samples(const TaskSpec& spec, std::vector<at::Tensor>& args);

// Param values that stand in for the drawn ones in every call, by the param's index (KernelBench's
// rule for parameters: the values of the task's KernelBench Model built under one seed).
using FixedParams = std::vector<std::pair<size_t, at::Tensor>>;
// Copies `fixed` into the params of `args` (inputs first, then params), in place.
void apply_fixed_params(const TaskSpec& spec, const FixedParams& fixed, const std::vector<at::Tensor>& args);

// The value of a KernelBench tensor (one of spec.kernelbench_params' entries) at `scale`, made from the value
// of the param that holds it: the same tensor, or reshaped, or a contiguous copy with two dimensions swapped
// (as a module's own parameter would be). Throws Error when `value` is not the param's shape at `scale`.
at::Tensor kernelbench_value(const TaskSpec& spec, const KernelBenchTensor& tensor, const at::Tensor& value,
                             const std::string& scale);

// A generator for `device` (cpu or cuda; InputError otherwise) seeded with `stream_seed`.
at::Generator make_argument_generator(const at::Device& device, uint64_t stream_seed);

// The generator seed of argument `index` of forward (inputs first, then params).
uint64_t argument_stream_seed(const TaskSpec& spec, uint64_t seed, size_t index);

}  // namespace crl
