// Edge trials: forward's arguments with values at the edges a task's operation cares about (its
// spec's `edges`: clamp bounds, exact zeros, large magnitudes, both signs), so that a branch the
// spec's random inputs seldom take is still tested.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "program/task_spec.h"

namespace crl {

// The share of a tensor's elements that an edge trial replaces (split evenly between the tensor's
// edges); the rest keep the spec's values, so the ordinary distribution is tested beside the edges.
inline constexpr double kEdgeFraction = 0.5;

// The relative width of around(v): values are v exactly (a quarter of them) or v + d with d normal of
// standard deviation kAroundWidth * max(1, |v|), so both sides of the bound are taken and a program
// that ignores the bound errs by far more than any tolerance.
inline constexpr double kAroundWidth = 0.05;

// Edges are written in chunks of this many elements (bounding the temporaries, see below).
inline constexpr int64_t kEdgeChunkElements = int64_t{1} << 22;

// forward's arguments for an edge trial: make_arguments(spec, scale, seed, device), then, in every
// tensor that declares edges, kEdgeFraction of the elements (chosen at random) replaced by edge
// values. Deterministic for a (seed, device type) pair; tensors without edges are exactly
// make_arguments' tensors. The edges are written in place in chunks of kEdgeChunkElements, so the
// arguments take the memory of the normal ones plus temporaries of one chunk (about 40 bytes
// per chunk element, 160 MiB at most), whatever the tensor's size.
std::vector<at::Tensor> make_edge_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed,
                                            const at::Device& device);

// Writes `tensor`'s edges into `values` (a contiguous tensor of its spec's shape and dtype) in place,
// drawing from a generator seeded from `stream_seed`. Does nothing when the tensor has no edges.
void apply_edges(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale, uint64_t stream_seed,
                 at::Tensor& values);

}  // namespace crl
