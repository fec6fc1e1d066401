// Tests of the spec's `kernelbench_params`: what it records (order, shapes, params, transforms, reasons), its
// checks at every scale with errors that name the file, line, key and what differs, and the values made from it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl {
namespace {

// At full scale in = out, so a weight written transposed without saying so passes there and fails at small.
const std::string kBase =
    "task: level2/001_conv\n"                                                   // line 3
    "category: gemm\n"                                                          // 4
    "inputs:\n"                                                                 // 5
    "  - {name: x, shape: [batch, in], dtype: float32}\n"                       // 6
    "params:\n"                                                                 // 7
    "  - {name: w, shape: [out, in], dtype: float32}\n"                         // 8
    "  - {name: b, shape: [out], dtype: float32}\n"                             // 9
    "  - {name: scale, shape: [out, 1, 1], dtype: float32}\n"                   // 10
    "scales:\n"                                                                 // 11
    "  full: {batch: 4, in: 64, out: 64}\n"                                     // 12
    "  small: {batch: 2, in: 8, out: 16}\n"                                     // 13
    "flops: batch\n"                                                            // 14
    "bytes: batch\n"                                                            // 15
    "kernelbench_params:\n"                                                     // 16
    "  parameters:\n";                                                          // 17

// KernelBench's order: the extra parameter first, then the layer's; a BatchNorm-like buffer of its own.
const std::string kGood = kBase +
    "    - {name: scale, shape: [out, 1, 1], param: scale}\n"                   // 18
    "    - {name: gemm.weight, shape: [out, in], param: w}\n"                    // 19
    "    - {name: gemm.bias, shape: [out], param: b}\n"                          // 20
    "  buffers:\n"                                                              // 21
    "    - {name: bn.running_mean, shape: [out], unmatched: 'unused in training mode'}\n";  // 22

TaskSpec parse(const std::string& text) { return parse_task_spec(SourceSection{true, text, 3}, "t.crl"); }

std::string spec_error(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// kGood with its entry on line `line` (18-20, 22) replaced.
std::string with_entry(int line, const std::string& entry) {
  std::string text = kGood;
  size_t begin = 0;
  for (int l = 3; l < line; ++l) begin = text.find('\n', begin) + 1;
  const size_t end = text.find('\n', begin);
  return text.replace(begin, end - begin, entry);
}

TEST(KernelBenchParams, RecordsTheModulesOrderAndWhichParamEachTensorIs) {
  const TaskSpec spec = parse(kGood);
  ASSERT_TRUE(spec.kernelbench_params.has_value());
  const KernelBenchParams& kb = *spec.kernelbench_params;
  ASSERT_EQ(kb.parameters.size(), 3u);
  ASSERT_EQ(kb.buffers.size(), 1u);
  EXPECT_EQ(kb.where, "t.crl:16");
  EXPECT_EQ(kb.parameters[0].name, "scale");
  EXPECT_EQ(kb.parameters[0].param, std::optional<size_t>(2));
  EXPECT_EQ(kb.parameters[1].name, "gemm.weight");
  EXPECT_EQ(kb.parameters[1].param, std::optional<size_t>(0));
  EXPECT_EQ(kb.parameters[1].transform, KernelBenchTransform::identity);
  EXPECT_EQ(kb.parameters[1].where, "t.crl:19");
  EXPECT_EQ(spec.kernelbench_shape_at(kb.parameters[1], "small"), (std::vector<int64_t>{16, 8}));
  EXPECT_FALSE(kb.buffers[0].param.has_value());
  EXPECT_EQ(kb.buffers[0].unmatched, "unused in training mode");
  EXPECT_EQ(spec.kernelbench_shape_at(kb.buffers[0], "full"), (std::vector<int64_t>{64}));
  EXPECT_TRUE(kb.crl_only.empty());
}

TEST(KernelBenchParams, AbsentIsNotEmpty) {
  std::string without = kBase.substr(0, kBase.find("kernelbench_params:"));
  EXPECT_FALSE(parse(without).kernelbench_params.has_value());
  // A module without tensors: every param must then be under crl_only.
  EXPECT_EQ(spec_error(without + "kernelbench_params: {parameters: [], buffers: []}\n"),
            "t.crl:16: kernelbench_params: no KernelBench tensor holds param 'w'; name it as one's param, or say why "
            "under crl_only");
  const TaskSpec none = parse(without +
                              "kernelbench_params:\n  parameters: []\n  buffers: []\n  crl_only:\n"
                              "    w: 'the module computes it'\n    b: 'the module computes it'\n    scale: 'a constant'\n");
  ASSERT_TRUE(none.kernelbench_params.has_value());
  EXPECT_TRUE(none.kernelbench_params->parameters.empty());
  EXPECT_EQ(none.kernelbench_params->crl_only.at("scale"), "a constant");
}

TEST(KernelBenchParams, TransformsReshapeOrSwapTwoDimensions) {
  const TaskSpec spec = parse(with_entry(18, "    - {name: scale, shape: [out], param: scale, transform: reshape}"));
  EXPECT_EQ(spec.kernelbench_params->parameters[0].transform, KernelBenchTransform::reshape);
  const TaskSpec t = parse(with_entry(19, "    - {name: gemm.weight, shape: [in, out], param: w, transform: 'transpose(1, 0)'}"));
  const KernelBenchTensor& weight = t.kernelbench_params->parameters[1];
  EXPECT_EQ(weight.transform, KernelBenchTransform::transpose);
  EXPECT_EQ(weight.dim0, 1);
  EXPECT_EQ(weight.dim1, 0);
  EXPECT_EQ(t.kernelbench_shape_at(weight, "small"), (std::vector<int64_t>{8, 16}));

  // The values the module gets: the param's, as it is, reshaped, or transposed into a contiguous copy.
  const at::Tensor w = at::arange(16 * 8, at::kFloat).reshape({16, 8});
  const at::Tensor transposed = kernelbench_value(t, weight, w, "small");
  EXPECT_TRUE(transposed.is_contiguous());
  EXPECT_TRUE(at::equal(transposed, w.t()));
  const at::Tensor s = at::arange(16, at::kFloat).reshape({16, 1, 1});
  EXPECT_TRUE(at::equal(kernelbench_value(spec, spec.kernelbench_params->parameters[0], s, "small"), s.reshape({16})));
  const KernelBenchTensor& bias = spec.kernelbench_params->parameters[2];
  const at::Tensor b = at::ones({16});
  EXPECT_TRUE(kernelbench_value(spec, bias, b, "small").is_same(b));
  EXPECT_THROW(kernelbench_value(spec, bias, at::ones({64}), "small"), Error);  // the full scale's value
  EXPECT_THROW(kernelbench_value(spec, spec.kernelbench_params->buffers[0], b, "small"), Error);  // no param holds it
}

TEST(KernelBenchParams, ShapesAreCheckedAtEveryScale) {
  // Written as the transpose's shape without the transform: the same at full (64 x 64), not at small.
  EXPECT_EQ(spec_error(with_entry(19, "    - {name: gemm.weight, shape: [in, out], param: w}")),
            "t.crl:19: kernelbench_params: parameter 'gemm.weight' (param 'w'): shape [8, 16] at scale 'small' is not the "
            "param's [16, 8]; write the param's shape, or a transform (reshape, transpose(a, b))");
  EXPECT_EQ(spec_error(with_entry(18, "    - {name: scale, shape: [out, 2], param: scale, transform: reshape}")),
            "t.crl:18: kernelbench_params: parameter 'scale' (param 'scale', reshape): shape [64, 2] at scale 'full' has "
            "128 elements, the param's [64, 1, 1] has 64");
  EXPECT_EQ(spec_error(with_entry(19, "    - {name: gemm.weight, shape: [out, in], param: w, transform: 'transpose(0, 1)'}")),
            "t.crl:19: kernelbench_params: parameter 'gemm.weight' (param 'w', transpose(0, 1)): shape [16, 8] at scale "
            "'small' is not the param's [16, 8] with dimensions 0 and 1 swapped ([8, 16])");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: b, transform: 'transpose(0, 1)'}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias' (param 'b', transpose(0, 1)): the param has 1 dimensions "
            "at scale 'full'; transpose(0, 1) names one it does not have");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: bn.running_mean, shape: [hidden], unmatched: 'unused'}")),
            "t.crl:22: kernelbench_params: buffer 'bn.running_mean' shape: expression 'hidden': unknown variable 'hidden' "
            "(the scale defines: batch, in, out) (scale 'full')");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: bn.running_mean, shape: [out - 32], unmatched: 'unused'}")),
            "t.crl:22: kernelbench_params: buffer 'bn.running_mean': dimension 'out - 32' is negative (-16) at scale 'small'");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: bn.running_mean, shape: [out / 3], unmatched: 'unused'}")).find(
                "t.crl:22: kernelbench_params: buffer 'bn.running_mean' shape: expression 'out / 3'"), 0u);
}

TEST(KernelBenchParams, EveryParamIsOneTensorsOrSaysWhyNot) {
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: wb}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': param 'wb' is not one of the spec's params (the params: "
            "w, b, scale)");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [batch, in], param: x}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': param 'x' is an input, not a param (the params: w, b, "
            "scale)");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: bn.running_mean, shape: [out], param: b}")),
            "t.crl:22: kernelbench_params: param 'b' is held by two tensors, 'gemm.bias' (t.crl:20) and "
            "'bn.running_mean'; each param is one tensor's");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], unmatched: 'never read'}")),
            "t.crl:16: kernelbench_params: no KernelBench tensor holds param 'b'; name it as one's param, or say why under "
            "crl_only");
  // crl_only covers it, but only a param no tensor holds.
  const std::string uncovered = with_entry(20, "    - {name: gemm.bias, shape: [out], unmatched: 'never read'}");
  EXPECT_NO_THROW(parse(uncovered + "  crl_only: {b: 'the reference adds it; the module has no bias'}\n"));
  EXPECT_EQ(spec_error(kGood + "  crl_only: {b: 'no bias'}\n"),
            "t.crl:16: kernelbench_params: param 'b' is under crl_only, yet tensor 'gemm.bias' (t.crl:20) holds it");
  EXPECT_EQ(spec_error(uncovered + "  crl_only: {b: 'no bias', c: 'none'}\n"),
            "t.crl:16: kernelbench_params: crl_only names 'c', which is not one of the spec's params");
  EXPECT_EQ(spec_error(uncovered + "  crl_only: {b: ''}\n"), "t.crl:23: kernelbench_params: crl_only: say why no tensor holds 'b'");
}

TEST(KernelBenchParams, EntriesAreStrict) {
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: b, unmatched: 'x'}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': give either 'param' (the crl param that holds its value) "
            "or 'unmatched' (why none does), not both");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out]}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': give either 'param' (the crl param that holds its value) "
            "or 'unmatched' (why none does), found neither");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: bn.running_mean, shape: [out], unmatched: 'x', transform: reshape}")),
            "t.crl:22: kernelbench_params: buffer 'bn.running_mean': a transform needs a param to transform");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: b, transform: permute}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': expected transform reshape or transpose(a, b) with "
            "dimensions a and b of the param (leave it out when the param is the tensor as it is) (found 'permute')");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: b, transform: 'transpose(0, 0)'}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': transform 'transpose(0, 0)' swaps a dimension with "
            "itself; leave the transform out");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm..bias, shape: [out], param: b}")),
            "t.crl:20: kernelbench_params: parameters: expected a qualified name such as conv.weight or layers.0.bias "
            "(found 'gemm..bias')");
  EXPECT_EQ(spec_error(with_entry(22, "    - {name: gemm.bias, shape: [out], unmatched: 'x'}")),
            "t.crl:22: kernelbench_params: tensor 'gemm.bias' appears twice (parameters and buffers share the module's "
            "names)");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: [out], param: b, dtype: float32}")),
            "t.crl:20: unknown key 'dtype' in an entry of kernelbench_params: parameters (known keys: name, param, shape, "
            "transform, unmatched)");
  EXPECT_EQ(spec_error(with_entry(20, "    - {name: gemm.bias, shape: out, param: b}")),
            "t.crl:20: kernelbench_params: parameter 'gemm.bias': expected 'shape' to be a list of expressions ([] for a "
            "scalar)");
  EXPECT_EQ(spec_error(kGood.substr(0, kGood.find("  buffers:"))),
            "t.crl:16: kernelbench_params: expected 'buffers' to be a list (the module's named_buffers() in order; [] for "
            "none)");
  EXPECT_EQ(spec_error(kGood + "  modules: []\n"),
            "t.crl:23: unknown key 'modules' in 'kernelbench_params' (known keys: buffers, crl_only, parameters)");
  EXPECT_EQ(spec_error(kBase.substr(0, kBase.find("kernelbench_params:")) + "kernelbench_params: [w, b]\n"),
            "t.crl:16: expected 'kernelbench_params' to be a mapping of parameters and buffers (lists) and crl_only "
            "(optional) (found '[w, b]')");
  // Module paths with indices (nn.Sequential's children) and scalars are names and shapes like others.
  EXPECT_NO_THROW(parse(with_entry(22, "    - {name: features.0.num_batches_tracked, shape: [], unmatched: 'a counter'}")));
}

}  // namespace
}  // namespace crl
