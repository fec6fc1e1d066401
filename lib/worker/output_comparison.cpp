// Output comparison in float64 (one parallel pass on the CPU; one kernel on the GPU where the
// outputs live), with NaN/Inf rules and the worst element reported.
#include "worker/output_comparison.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "worker/compare_rule.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "worker/compare_values_cuda.h"
#endif

namespace crl::worker {

namespace {

std::string shape_text(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

std::string dtype_text(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

// One pass over both tensors (contiguous, same shape and dtype), in parallel, each element by
// compare_rule.h. 64-bit integers beyond 2^53 compare exactly by value (equal integers are skipped
// before the float64 rule). Memory-bound: the earlier form (chunks converted to float64 tensors, a
// dozen ATen passes) compared 256 MiB in 2.6 s here.
CompareStats compare_values(const at::Tensor& ref, const at::Tensor& cand, const Tolerance& tol) {
  CompareStats total;
  std::mutex mutex;
  const int64_t n = ref.numel();
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, ref.scalar_type(), "compare_values", [&] {
    const scalar_t* r = ref.const_data_ptr<scalar_t>();
    const scalar_t* c = cand.const_data_ptr<scalar_t>();
    at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
      CompareStats local;
      for (int64_t i = begin; i < end; ++i) {
        constexpr bool integral = std::is_integral_v<scalar_t>;
        if (integral && r[i] == c[i]) continue;
        compare_rule::add_element(local, i, static_cast<double>(r[i]), static_cast<double>(c[i]), tol.atol, tol.rtol, integral);
      }
      std::lock_guard<std::mutex> lock(mutex);
      compare_rule::join(total, local);
    });
  });
  return total;
}

// A float32 output against the float64 reference (the float32 one, its error and error scale): the same pass.
CompareStats compare_values_float64(const at::Tensor& ref, const at::Tensor& cand, const at::Tensor& delta, const at::Tensor& scale,
                                    const Tolerance& tol) {
  CompareStats total;
  std::mutex mutex;
  const float* r = ref.const_data_ptr<float>();
  const float* c = cand.const_data_ptr<float>();
  const c10::BFloat16* d = delta.const_data_ptr<c10::BFloat16>();
  const c10::BFloat16* e = scale.const_data_ptr<c10::BFloat16>();
  const int64_t n = ref.numel();
  const int64_t blocks = (n + kErrorScaleBlock - 1) / kErrorScaleBlock;
  at::parallel_for(0, blocks, int64_t{1} << 8, [&](int64_t begin, int64_t end) {
    CompareStats local;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kErrorScaleBlock, last = std::min(n, first + kErrorScaleBlock);
      float block_scale = 0;  // the largest error scale of the block (compare_rule.h)
      for (int64_t i = first; i < last; ++i) block_scale = std::max(block_scale, std::fabs(static_cast<float>(e[i])));
      for (int64_t i = first; i < last; ++i) {
        compare_rule::add_element_float64(local, i, r[i], c[i], static_cast<float>(d[i]), static_cast<float>(e[i]), block_scale, tol.atol,
                                          tol.rtol, kElementPrecisionFactor);
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    compare_rule::join(total, local);
  });
  return total;
}

#if CRL_HAVE_CUDA
// The same rules on the GPU that holds both tensors, in one pass (compare_values_cuda.cu): the
// judge compares where the outputs are. The ATen form it replaced (chunks converted to float64, a
// dozen passes) took 184 ms of a 220 ms timed pair of level1/019 ReLU at full scale on the H200 and
// needed ~2.5 GB of temporaries.
cuda::ValueType value_type(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return cuda::ValueType::f16;
    case at::kBFloat16: return cuda::ValueType::bf16;
    case at::kFloat: return cuda::ValueType::f32;
    case at::kDouble: return cuda::ValueType::f64;
    case at::kByte: return cuda::ValueType::u8;
    case at::kChar: return cuda::ValueType::i8;
    case at::kShort: return cuda::ValueType::i16;
    case at::kInt: return cuda::ValueType::i32;
    case at::kLong: return cuda::ValueType::i64;
    case at::kBool: return cuda::ValueType::boolean;
    default: throw Error(fmt::format("outputs of dtype {} cannot be compared on the GPU", c10::toString(t)));
  }
}

CompareStats compare_values_on_device(const at::Tensor& ref, const at::Tensor& cand, const at::Tensor& delta, const at::Tensor& scale,
                                      const Tolerance& tol) {
  const at::Tensor r = ref.contiguous(), c = cand.contiguous();
  const c10::cuda::CUDAGuard on_device(r.device());
  const at::Tensor partials =
      at::empty({static_cast<int64_t>(cuda::compare_blocks(r.numel()) * sizeof(CompareStats))}, r.options().dtype(at::kByte));
  auto* stats = static_cast<CompareStats*>(partials.data_ptr());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  if (delta.defined()) {
    const at::Tensor d = delta.contiguous(), e = scale.contiguous();
    return cuda::compare_values_float64(r.const_data_ptr<float>(), c.const_data_ptr<float>(), d.const_data_ptr(), e.const_data_ptr(),
                                        r.numel(), tol.atol, tol.rtol, kElementPrecisionFactor, stats, stream);
  }
  return cuda::compare_values(value_type(r.scalar_type()), r.const_data_ptr(), c.const_data_ptr(), r.numel(), tol.atol, tol.rtol, stats,
                              stream);
}
#else
CompareStats compare_values_on_device(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const Tolerance&) {
  throw Error("this build has no CUDA: outputs on a GPU cannot be compared");
}
#endif

// The summed errors' ratio (compare_rule.h); the smallest normal float per element keeps an output
// of exact zeros from dividing by zero (any error there is then far beyond the factor).
double precision_ratio(const CompareStats& s, int64_t n) {
  const double floor = static_cast<double>(n) * 0x1p-126;
  return s.sum_error / (s.sum_scale + floor);
}

}  // namespace

namespace {

// A GPU tensor against its copy on the host, 256 MiB at a time (the guards' copies of tensors too
// large to copy twice on the device).
bool same_bytes_as_host_copy(const at::Tensor& on_gpu, const at::Tensor& on_host) {
  const at::Tensor x = on_gpu.contiguous().view(-1).view(at::kByte), y = on_host.contiguous().view(-1).view(at::kByte);
  constexpr int64_t kChunk = int64_t{256} << 20;
  for (int64_t at_byte = 0; at_byte < x.numel(); at_byte += kChunk) {
    const int64_t n = std::min(kChunk, x.numel() - at_byte);
    const at::Tensor chunk = x.slice(0, at_byte, at_byte + n).to(at::kCPU);
    if (std::memcmp(chunk.const_data_ptr(), static_cast<const char*>(y.const_data_ptr()) + at_byte, static_cast<size_t>(n)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.device() != b.device()) {
    if (a.is_cuda() && b.is_cpu()) return same_bytes_as_host_copy(a, b);
    if (a.is_cpu() && b.is_cuda()) return same_bytes_as_host_copy(b, a);
    throw Error(fmt::format("cannot compare the bytes of a tensor on {} with one on {}", a.device().str(), b.device().str()));
  }
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  if (x.device().is_cpu()) return std::memcmp(x.const_data_ptr(), y.const_data_ptr(), x.nbytes()) == 0;
#if CRL_HAVE_CUDA
  const c10::cuda::CUDAGuard on_device(x.device());
  const at::Tensor flag = at::empty({4}, x.options().dtype(at::kByte));
  return cuda::bytes_equal(x.const_data_ptr(), y.const_data_ptr(), x.nbytes(), static_cast<uint32_t*>(flag.data_ptr()),
                           at::cuda::getCurrentCUDAStream().stream());
#else
  throw Error("this build has no CUDA: tensors on a GPU cannot be compared");
#endif
}

ComparisonResult compare_outputs(const std::vector<ProgramOutput>& reference,
                                 const std::vector<ProgramOutput>& candidate,
                                 const ToleranceForDtype& tolerance_for) {
  ComparisonResult result;
  if (reference.size() != candidate.size()) {
    result.message = fmt::format("returned {} outputs, the reference returns {}", candidate.size(), reference.size());
    return result;
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    const at::Tensor& ref = reference[i].values;
    const at::Tensor& cand = candidate[i].values;
    const int index = static_cast<int>(i);
    auto fail = [&](std::string message) {
      result.ok = false;
      result.output_index = index;
      result.message = fmt::format("output {}: {}", i, message);
      return result;
    };
    if (!cand.defined()) return fail("is an undefined tensor");
    if (ref.sizes() != cand.sizes()) {
      return fail(fmt::format("shape {} but the reference's is {}", shape_text(cand), shape_text(ref)));
    }
    if (ref.scalar_type() != cand.scalar_type()) {
      return fail(fmt::format("dtype {} but the reference's is {}", dtype_text(cand), dtype_text(ref)));
    }
    if (reference[i].device != candidate[i].device) {
      return fail(fmt::format("on device {} but the reference's is on {}", candidate[i].device, reference[i].device));
    }
    if (ref.numel() == 0) continue;
    const Tolerance tol = tolerance_for(ref.scalar_type());
    if (ref.device() != cand.device()) return fail("is not where the reference's output is (crl compares like with like)");
    const at::Tensor& delta = reference[i].float64_delta;
    const at::Tensor& scale = reference[i].float64_scale;
    const bool float64 = delta.defined() && ref.scalar_type() == at::kFloat;
    for (const at::Tensor* t : {&delta, &scale}) {
      if (float64 && (!t->defined() || t->sizes() != ref.sizes() || t->scalar_type() != at::kBFloat16 || t->device() != ref.device())) {
        throw Error(fmt::format("output {}: the float64 reference's error does not match the output's shape or device", i));
      }
    }
    CompareStats stats;
    if (!ref.is_cpu()) {
      stats = compare_values_on_device(ref, cand, float64 ? delta : at::Tensor(), scale, tol);
    } else if (float64) {
      stats = compare_values_float64(ref.contiguous(), cand.contiguous(), delta.contiguous(), scale.contiguous(), tol);
    } else {
      stats = compare_values(ref.contiguous(), cand.contiguous(), tol);
    }
    result.max_abs_error = std::max(result.max_abs_error, stats.max_abs_error);
    const double ratio = float64 ? precision_ratio(stats, ref.numel()) : -1;
    result.precision_ratio = std::max(result.precision_ratio, ratio);
    if (stats.bad == 0 && ratio > kPrecisionFactor) {
      return fail(fmt::format("precision: its error against the float64 reference is {:.3g} times what float32 arithmetic errs "
                              "there (the float32 reference's own error and its response to rounding its inputs, summed over "
                              "the {} elements; at most {:g}): lower precision than the task's float32 (TF32, fp16, bf16 math, "
                              "or a coarse approximation)",
                              ratio, ref.numel(), kPrecisionFactor));
    }
    if (stats.bad == 0) continue;
    result.worst_index = stats.worst_index;
    result.worst_reference = stats.worst_reference;
    result.worst_candidate = stats.worst_candidate;
    result.mismatched_elements = stats.bad;
    return fail(fmt::format(
        "{} of {} elements outside atol {:g} + rtol {:g}{}; worst at flat index {}: got {:.8g}, expected {:.8g}{}",
        stats.bad, ref.numel(), tol.atol, tol.rtol,
        float64 ? fmt::format(" of the float64 reference, widened by {:g}x float32's error there", kElementPrecisionFactor) : "",
        result.worst_index, result.worst_candidate, result.worst_reference, float64 ? " (float64)" : ""));
  }
  result.ok = true;
  return result;
}

bool batch_copy_would_pass(const std::vector<ProgramOutput>& outputs, const ToleranceForDtype& tolerance_for) {
  bool any_batch = false;
  for (const auto& out : outputs) {
    if (out.values.dim() < 1 || out.values.size(0) < 2) continue;
    any_batch = true;
    // Sample by sample against sample 0, so nothing of the output's size is allocated, and the
    // usual case (samples differ) stops at the first.
    const std::vector<ProgramOutput> first{{out.values.narrow(0, 0, 1), out.device}};
    for (int64_t b = 1; b < out.values.size(0); ++b) {
      if (!compare_outputs({{out.values.narrow(0, b, 1), out.device}}, first, tolerance_for).ok) return false;
    }
  }
  return any_batch;
}

}  // namespace crl::worker
