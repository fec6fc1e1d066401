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
// An ordinary call's share of the same values (program/value_mix.h): about `fraction` of the
// elements, drawn at random (a place drawn twice is moved once on the GPU, twice on the CPU: the last
// stays, in order), moved to the tensor's declared edges
// (where `declared`) and, where `magnitudes`, scaled magnitudes, split evenly. Only those elements are
// read and written, so a timed fill of many slots pays for the share, not for the tensor. `count_draw`
// in [0, 1) rounds fraction * numel to a whole count (deterministic per call).
void sprinkle_edges(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale, uint64_t stream_seed,
                    at::Tensor& values, double fraction, double count_draw, bool declared, bool magnitudes);

std::vector<at::Tensor> make_edge_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed,
                                            const at::Device& device);

// Writes `tensor`'s edges into `values` (a contiguous tensor of its spec's shape and dtype) in place,
// drawing from a generator seeded from `stream_seed`: `fraction` of the elements, split evenly between
// its declared edges and, where `magnitudes`, one more edge of magnitudes the init never draws (the
// element scaled by 2^e, e in [4, 10] for half of that share and in [-10, -4] for the other half;
// program/value_mix.h). Does nothing when the tensor has neither.
void apply_edges(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale, uint64_t stream_seed,
                 at::Tensor& values, double fraction = kEdgeFraction, bool magnitudes = false);

}  // namespace crl
