// Seeded, on-device generation of forward's arguments: init kinds and post ops of the format doc.
#include "program/arguments.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/statistics.h"

namespace crl {

at::Generator make_argument_generator(const at::Device& device, uint64_t stream_seed) {
  at::Generator gen;
  if (device.is_cpu()) {
    gen = at::detail::createCPUGenerator(stream_seed);
  } else if (device.is_cuda()) {
    gen = at::detail::getCUDAHooks().getNewGenerator(device.has_index() ? device.index() : 0);
    gen.set_current_seed(stream_seed);
  } else {
    throw InputError(fmt::format("make_arguments: device '{}' is not supported (cpu or cuda)", device.str()));
  }
  return gen;
}

uint64_t argument_stream_seed(const TaskSpec& spec, uint64_t seed, size_t index) {
  const bool is_param = index >= spec.inputs.size();
  const uint64_t within = is_param ? index - spec.inputs.size() : index;
  // The tag is spread by a multiplication, not by mix64: mix64(seed) ^ mix64(tag) is symmetric, so
  // seed 1's second tensor equalled seed 2's first.
  const uint64_t tag = (static_cast<uint64_t>(is_param) << 32) + within + 1;
  return mix64(mix64(seed) ^ (tag * 0xd1b54a32d192ed03ULL));
}

at::Tensor make_argument(const TaskSpec& spec, const TensorSpec& tensor, const std::string& scale,
                         uint64_t stream_seed, const at::Device& device, at::Tensor into) {
  const ScaleVariables& vars = spec.scale_variables(scale);
  const std::vector<int64_t> shape = spec.shape_at(tensor, scale);
  // Random draws are made in the tensor's own dtype (ATen samples in float and rounds inside the
  // kernel): a float32 temporary would double the memory and time of full-scale half inputs.
  const auto draw = at::TensorOptions().dtype(tensor.dtype).device(device);
  const auto exact = draw;
  at::Generator gen = make_argument_generator(device, stream_seed);
  const auto arg = [&](size_t i) { return tensor.init.args.at(i).evaluate(vars); };
  if (into.defined() && (into.sizes() != at::IntArrayRef(shape) || into.scalar_type() != tensor.dtype || !into.is_contiguous())) {
    throw InputError(fmt::format("make_argument: the destination is not a contiguous {} tensor of the argument's shape", at::toString(tensor.dtype)));
  }
  // The tensor the draw starts in: `into`, else a new one (ATen's rand, ones, full are such a
  // tensor filled in place, so both give the same values).
  const auto start = [&] { return into.defined() ? into : at::empty(shape, draw); };
  at::Tensor t;
  switch (tensor.init.kind) {
    case InitKind::randn: t = start().normal_(0, 1, gen); break;
    case InitKind::rand: t = start().uniform_(0, 1, gen); break;
    case InitKind::uniform: t = start().uniform_(arg(0), arg(1), gen); break;
    case InitKind::normal: t = start().normal_(arg(0), arg(1), gen); break;
    case InitKind::uniform_fan_in: {
      const double bound = 1.0 / std::sqrt(arg(0));
      t = start().uniform_(-bound, bound, gen);
      break;
    }
    case InitKind::randint: {
      const int64_t lo = tensor.init.args[0].evaluate_integer(vars), hi = tensor.init.args[1].evaluate_integer(vars);
      // random_(from, to) draws integers in [from, to) for any dtype, bool included.
      t = start().random_(lo, hi, gen);
      break;
    }
    case InitKind::ones: t = start().fill_(1); break;
    case InitKind::zeros: t = start().zero_(); break;
    case InitKind::full:
      if (at::isFloatingType(tensor.dtype)) {
        t = start().fill_(arg(0));
      } else {
        t = start().fill_(tensor.init.args[0].evaluate_integer(vars));
      }
      break;
  }
  if (t.scalar_type() != tensor.dtype) t = t.to(tensor.dtype);
  for (const PostOp& op : tensor.post) {
    switch (op.kind) {
      case PostKind::abs: t.abs_(); break;
      case PostKind::tril: t.tril_(); break;
      case PostKind::triu: t.triu_(); break;
      case PostKind::symmetric: t = (t + t.transpose(-1, -2)).div_(2); break;
      case PostKind::softmax: {
        const int64_t dim = op.args[0].evaluate_integer(vars);
        // Softmax in float32 then rounded, so rows of half tensors sum to 1 as closely as they can.
        t = at::softmax(t, dim, at::kFloat).to(tensor.dtype);
        break;
      }
      case PostKind::add:
        if (at::isFloatingType(tensor.dtype)) t.add_(op.args[0].evaluate(vars));
        else t.add_(op.args[0].evaluate_integer(vars));
        break;
      case PostKind::mul:
        if (at::isFloatingType(tensor.dtype)) t.mul_(op.args[0].evaluate(vars));
        else t.mul_(op.args[0].evaluate_integer(vars));
        break;
      case PostKind::mul_rand: {
        // One scalar for the whole tensor, from the tensor's own stream (drawn after its values),
        // so that a statistic over billions of elements (a loss's mean) still changes from seed to seed.
        const at::Tensor scalar = at::empty({}, at::TensorOptions().dtype(at::kFloat).device(device))
                                      .uniform_(op.args[0].evaluate(vars), op.args[1].evaluate(vars), gen);
        t.mul_(scalar.item<float>());
        break;
      }
    }
  }
  if (into.defined()) {
    if (!t.is_same(into)) into.copy_(t);  // (a post op that made a new tensor: symmetric, softmax)
    return into;
  }
  return t.contiguous();
}

void fill_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed, const std::vector<at::Tensor>& args) {
  if (args.size() != spec.num_args()) throw InputError(fmt::format("fill_arguments: {} tensors for {} arguments", args.size(), spec.num_args()));
  for (size_t i = 0; i < args.size(); ++i) {
    (void)make_argument(spec, spec.arg(i), scale, argument_stream_seed(spec, seed, i), args[i].device(), args[i]);
  }
}

size_t spread_samples(const TaskSpec& spec, std::vector<at::Tensor>& args) {
  size_t scaled = 0;
  for (size_t i = 0; i < spec.inputs.size() && i < args.size(); ++i) {
    const TensorSpec& input = spec.inputs[i];
    at::Tensor& t = args[i];
    const InitKind k = input.init.kind;
    const bool continuous = k == InitKind::randn || k == InitKind::rand || k == InitKind::uniform ||
                            k == InitKind::normal || k == InitKind::uniform_fan_in;
    const bool structured = std::any_of(input.post.begin(), input.post.end(), [](const PostOp& op) {
      return op.kind == PostKind::tril || op.kind == PostKind::triu || op.kind == PostKind::symmetric ||
             op.kind == PostKind::softmax;
    });
    if (!continuous || structured || !at::isFloatingType(t.scalar_type()) || t.dim() < 1 || t.size(0) < 2) continue;
    std::vector<int64_t> factor_shape(static_cast<size_t>(t.dim()), 1);
    factor_shape[0] = t.size(0);
    const at::Tensor factors =
        at::linspace(0.9, 1.1, t.size(0), at::TensorOptions().dtype(at::kFloat).device(t.device())).view(factor_shape);
    t = (t.to(at::kFloat) * factors).to(t.scalar_type()).contiguous();
    ++scaled;
  }
  return scaled;
}

std::vector<at::Tensor> make_arguments(const TaskSpec& spec, const std::string& scale, uint64_t seed,
                                       const at::Device& device) {
  std::vector<at::Tensor> args;
  args.reserve(spec.num_args());
  for (size_t i = 0; i < spec.num_args(); ++i) {
    args.push_back(make_argument(spec, spec.arg(i), scale, argument_stream_seed(spec, seed, i), device));
  }
  return args;
}

at::Tensor kernelbench_value(const TaskSpec& spec, const KernelBenchTensor& tensor, const at::Tensor& value,
                             const std::string& scale) {
  const std::vector<int64_t> shape = spec.kernelbench_shape_at(tensor, scale);
  if (!tensor.param || value.sizes() != at::IntArrayRef(spec.shape_at(spec.params.at(*tensor.param), scale))) {
    const std::string what = tensor.param
                                 ? fmt::format("a value of shape [{}] is not its param's", fmt::join(value.sizes(), ", "))
                                 : std::string("no param holds it");
    throw Error(fmt::format("{}: KernelBench tensor '{}' at scale '{}': {}", tensor.where, tensor.name, scale, what));
  }
  switch (tensor.transform) {
    case KernelBenchTransform::identity:
      return value;
    case KernelBenchTransform::reshape:
      return value.reshape(shape);
    case KernelBenchTransform::transpose:
      return value.transpose(tensor.dim0, tensor.dim1).contiguous();
  }
  return value;
}

void apply_fixed_params(const TaskSpec& spec, const FixedParams& fixed, const std::vector<at::Tensor>& args) {
  for (const auto& [param, value] : fixed) args.at(spec.inputs.size() + param).copy_(value);
}

}  // namespace crl
