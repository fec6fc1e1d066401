// Edge trials' arguments: the spec's tensors with a share of their elements moved to the declared edges.
#include "program/edge_inputs.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>

#include "core/statistics.h"
#include "program/arguments.h"

namespace crl {
namespace {

// Separates the edge stream from the tensor's own stream (same seed, different draws).
constexpr uint64_t kEdgeStreamTag = 0x6564676573ULL;  // "edges"
constexpr uint64_t kSprinkleStreamTag = 0x737072696e6bULL;  // "sprink"

// Edge values for the elements of `chunk` (float32, `n` elements) whose position `share` within
// their edge's slice is in [0, 1); `normals` are standard normal draws for around().
at::Tensor edge_values(const EdgeSpec& edge, double arg, const at::Tensor& chunk, const at::Tensor& share,
                       const at::Tensor& normals) {
  switch (edge.kind) {
    case EdgeKind::around: {
      const double width = kAroundWidth * std::max(1.0, std::abs(arg));
      // A quarter exactly at the bound (where < and <= differ), the rest spread across both sides.
      return at::where(share < 0.25, arg, normals * width + arg);
    }
    case EdgeKind::zeros:
      // +0 and -0: a program may test the sign bit (signbit, copysign, 1/x).
      return at::where(share < 0.5, at::Scalar(0.0), at::Scalar(-0.0)).to(at::kFloat);
    case EdgeKind::large: {
      // Magnitudes in [m, 2m), half of each sign; `share` already gives the spread, no extra draw.
      const at::Tensor half = at::where(share < 0.5, share, share - 0.5) * 2;  // [0, 1) again
      const at::Tensor magnitude = (half + 1) * arg;
      return at::where(share < 0.5, -magnitude, magnitude);
    }
    case EdgeKind::signs: return -chunk;
  }
  return chunk;
}

// The element scaled by 2^e: e in [4, 10] where its share is below 1/2, in [-10, -4] above (the
// share within the slice spreads the exponents; no extra draw).
at::Tensor magnitude_values(const at::Tensor& chunk, const at::Tensor& share) {
  const at::Tensor half = at::where(share < 0.5, share, share - 0.5) * 2;  // [0, 1) again
  const at::Tensor exponent = half * 6 + 4;
  return chunk * at::exp2(at::where(share < 0.5, exponent, -exponent));
}

std::vector<double> edge_arguments(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale) {
  const ScaleVariables& vars = spec.scale_variables(scale);
  std::vector<double> edge_args;
  for (const EdgeSpec& e : tensor.edges) edge_args.push_back(e.args.empty() ? 0.0 : e.args[0].evaluate(vars));
  return edge_args;
}

// values[where[i]] = moved[i] for every i in order, so that of a place drawn twice the later draw
// stays. On the GPU `where` holds each place once (index_put_); on the CPU a serial loop: ATen's
// index_put_ writes from several threads there, and a repeated place then kept either value (the
// judge's fill and its check of the same slot disagreed: "arguments modified in place").
void write_in_draw_order(at::Tensor& flat, const at::Tensor& where, const at::Tensor& moved) {
  if (flat.is_cuda()) {
    flat.index_put_({where}, moved);
    return;
  }
  const at::Tensor places = where.contiguous();
  const at::Tensor from = moved.contiguous();
  const int64_t* place = places.const_data_ptr<int64_t>();
  const int64_t count = places.numel();
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, flat.scalar_type(), "write_in_draw_order", [&] {
    scalar_t* out = flat.data_ptr<scalar_t>();
    const scalar_t* in = from.const_data_ptr<scalar_t>();
    for (int64_t i = 0; i < count; ++i) out[place[i]] = in[i];
  });
}

}  // namespace

void sprinkle_edges(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale, uint64_t stream_seed,
                    at::Tensor& values, double fraction, double count_draw, bool declared, bool magnitudes) {
  const size_t edges = declared ? tensor.edges.size() : 0;
  const size_t slices = edges + (magnitudes ? 1 : 0);
  const int64_t n = values.numel();
  const int64_t count = static_cast<int64_t>(std::floor(fraction * static_cast<double>(n) + count_draw));
  if (slices == 0 || n == 0 || count <= 0) return;
  const std::vector<double> edge_args = edge_arguments(spec, tensor, scale);
  at::Generator gen = make_argument_generator(values.device(), mix64(stream_seed ^ kSprinkleStreamTag));
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(values.device());
  at::Tensor flat = values.view({-1});
  for (int64_t start = 0; start < count; start += kEdgeChunkElements) {
    // On the GPU each place once: index_put_ with a repeated index keeps whichever write lands last,
    // which there is not always the same one, and the judge makes these arguments more than once (a
    // fill, then check_inputs) and must make the same bytes. (The CPU writes in draw order, one
    // thread; sorting there was a third of the mix's cost.)
    const at::Tensor drawn = at::randint(n, {std::min(kEdgeChunkElements, count - start)}, gen,
                                         at::TensorOptions().dtype(at::kLong).device(values.device()));
    const at::Tensor where = values.is_cuda() ? std::get<0>(at::_unique(drawn, /*sorted=*/true)) : drawn;
    const int64_t m = where.numel();
    // One uniform draw per element picks its edge (slice) and spreads it within the slice.
    const at::Tensor pick = at::empty({m}, f32).uniform_(0, 1, gen).mul_(static_cast<double>(slices));
    const at::Tensor slice = pick.floor();
    const at::Tensor share = pick - slice;
    const bool any_around = std::any_of(tensor.edges.begin(), tensor.edges.begin() + static_cast<std::ptrdiff_t>(edges),
                                        [](const EdgeSpec& e) { return e.kind == EdgeKind::around; });
    const at::Tensor normals = any_around ? at::empty({m}, f32).normal_(0, 1, gen) : at::zeros({m}, f32);
    const at::Tensor old = flat.index_select(0, where).to(at::kFloat);
    at::Tensor moved = old;
    for (size_t k = 0; k < slices; ++k) {
      const at::Tensor values_here = k < edges ? edge_values(tensor.edges[k], edge_args[k], old, share, normals) : magnitude_values(old, share);
      moved = at::where(slice == static_cast<double>(k), values_here, moved);
    }
    write_in_draw_order(flat, where, moved.to(values.scalar_type()));
  }
}

void apply_edges(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale, uint64_t stream_seed,
                 at::Tensor& values, double fraction, bool magnitudes) {
  const size_t slices = tensor.edges.size() + (magnitudes ? 1 : 0);
  if (slices == 0 || values.numel() == 0 || fraction <= 0) return;
  const std::vector<double> edge_args = edge_arguments(spec, tensor, scale);
  at::Generator gen = make_argument_generator(values.device(), mix64(stream_seed ^ kEdgeStreamTag));
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(values.device());
  const double slice = fraction / static_cast<double>(slices);
  at::Tensor flat = values.view({-1});
  for (int64_t start = 0; start < flat.numel(); start += kEdgeChunkElements) {
    const int64_t n = std::min(kEdgeChunkElements, flat.numel() - start);
    at::Tensor chunk = flat.narrow(0, start, n);
    // One uniform draw per element picks whether it moves and to which edge ([1 - fraction, 1) is
    // split into one slice per edge), and its place within the slice spreads the values of the edge.
    const at::Tensor pick = at::empty({n}, f32).uniform_(0, 1, gen);
    const bool any_around = std::any_of(tensor.edges.begin(), tensor.edges.end(),
                                        [](const EdgeSpec& e) { return e.kind == EdgeKind::around; });
    const at::Tensor normals = any_around ? at::empty({n}, f32).normal_(0, 1, gen) : at::zeros({n}, f32);
    at::Tensor moved = chunk.to(at::kFloat);
    for (size_t k = 0; k < slices; ++k) {
      const double lo = 1.0 - fraction + static_cast<double>(k) * slice;
      const at::Tensor in_slice = (pick >= lo) & (pick < lo + slice);
      const at::Tensor share = ((pick - lo) / slice).clamp_(0, 1);
      const at::Tensor values_here =
          k < tensor.edges.size() ? edge_values(tensor.edges[k], edge_args[k], moved, share, normals) : magnitude_values(moved, share);
      moved = at::where(in_slice, values_here, moved);
    }
    chunk.copy_(moved);
  }
}

std::vector<at::Tensor> make_edge_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed,
                                            const at::Device& device) {
  std::vector<at::Tensor> args = make_arguments(spec, scale, seed, device);
  for (size_t i = 0; i < args.size(); ++i) {
    apply_edges(spec, spec.arg(i), scale, argument_stream_seed(spec, seed, i), args[i]);
  }
  return args;
}

}  // namespace crl
