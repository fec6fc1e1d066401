// The suite loads: 100 level-1 tasks in KernelBench's category counts, ids unique and equal to their
// paths, small scales small; invalid suites are refused with every problem named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "core/error.h"
#include "suite/suite.h"

namespace crl {
namespace {

const std::string kSuiteDir = std::string(CRL_SOURCE_DIR) + "/jobs/suite";
const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/suite";

const Suite& source_suite() {
  static const Suite suite = Suite::load(kSuiteDir);
  return suite;
}

TEST(Suite, LoadsHundredLevel1TasksWithKernelBenchCategoryCounts) {
  TaskFilter level1;
  level1.level = 1;
  const auto tasks = source_suite().select(level1);
  ASSERT_EQ(tasks.size(), 100u);
  std::map<std::string, int> counts;
  for (const Task* t : tasks) ++counts[t->spec.category];
  const std::map<std::string, int> expected = {{"matmul", 18},     {"activation", 15}, {"normalization", 8},
                                               {"pooling", 6},     {"reduction", 6},   {"convolution", 35},
                                               {"scan", 5},        {"loss", 6},        {"attention", 1}};
  EXPECT_EQ(counts, expected);
}

TEST(Suite, Level1IdsAreUniqueNumberedOneToHundredAndMatchTheirFiles) {
  TaskFilter level1;
  level1.level = 1;
  std::set<std::string> ids;
  std::set<int> numbers;
  for (const Task* t : source_suite().select(level1)) {
    EXPECT_TRUE(ids.insert(t->id).second) << t->id;
    numbers.insert(std::stoi(t->id.substr(7, 3)));
    const std::string tail = t->id.substr(t->id.find('/') + 1) + ".crl";
    EXPECT_EQ(t->path.substr(t->path.size() - tail.size()), tail);
    EXPECT_FALSE(t->spec.name.empty()) << t->id;
    EXPECT_FALSE(t->spec.description.empty()) << t->id;
  }
  EXPECT_EQ(numbers.size(), 100u);
  EXPECT_EQ(*numbers.begin(), 1);
  EXPECT_EQ(*numbers.rbegin(), 100);
}

TEST(Suite, EveryLevel1TaskHasFullAndSmallScalesWithPositiveCostAndSmallInputs) {
  TaskFilter level1;
  level1.level = 1;
  for (const Task* t : source_suite().select(level1)) {
    const TaskSpec& s = t->spec;
    ASSERT_TRUE(s.scales.count("full") && s.scales.count("small")) << t->id;
    for (const char* scale : {"full", "small"}) {
      EXPECT_GT(s.flops_at(scale), 0) << t->id << " " << scale;
      EXPECT_GT(s.bytes_at(scale), 0) << t->id << " " << scale;
    }
    EXPECT_LT(s.flops_at("small"), s.flops_at("full")) << t->id;
    // The CI check runs every small reference several times on one core: keep each below ~256 MFLOP
    // and its arguments below 16 MiB.
    EXPECT_LE(s.flops_at("small"), 256e6) << t->id;
    double arg_bytes = 0;
    for (size_t i = 0; i < s.num_args(); ++i) {
      double numel = 1;
      for (int64_t d : s.shape_at(s.arg(i), "small")) numel *= static_cast<double>(d);
      arg_bytes += numel * 4;
    }
    EXPECT_LE(arg_bytes, 16.0 * (1 << 20)) << t->id;
  }
}

TEST(Suite, KeepsKernelBenchFullScaleShapes) {
  // Spot checks against KernelBench's level-1 files (problem: variable = value there).
  const auto var = [](const char* id, const char* name) {
    return source_suite().find(id).spec.scale_variables("full").at(name);
  };
  EXPECT_EQ(var("level1/001_square_matmul", "n"), 4096);            // N = 2048 * 2
  EXPECT_EQ(var("level1/008_matmul_irregular_shapes", "k"), 2949);  // K = 2949
  EXPECT_EQ(var("level1/019_relu", "dim"), 393216);                 // dim = 393216
  EXPECT_EQ(var("level1/038_l1_norm", "dim"), 65535);               // dim = 65535
  EXPECT_EQ(var("level1/076_conv1d_dilated_strided", "length"), 524280);
  EXPECT_EQ(var("level1/097_scaled_dot_product_attention", "d"), 1024);
}

TEST(Suite, FindNamesTheSuiteAndSuggestsCloseIds) {
  try {
    source_suite().find("level1/019_reLU");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no task 'level1/019_reLU'"), std::string::npos) << what;
    EXPECT_NE(what.find("level1/019_relu"), std::string::npos) << what;
  }
}

TEST(Suite, SelectFiltersByLevelCategoryAndId) {
  TaskFilter f;
  f.level = 1;
  f.category = "scan";
  EXPECT_EQ(source_suite().select(f).size(), 5u);
  TaskFilter by_id;
  by_id.ids = {"level1/012_diag_matmul"};
  ASSERT_EQ(source_suite().select(by_id).size(), 1u);
  by_id.ids.push_back("level1/094_mse_loss");  // several ids, in the order given
  const auto two = source_suite().select(by_id);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1]->id, "level1/094_mse_loss");
  by_id.category = "loss";  // only the loss among them matches
  ASSERT_EQ(source_suite().select(by_id).size(), 1u);
  EXPECT_EQ(source_suite().select(by_id)[0]->id, "level1/094_mse_loss");
}

TEST(Suite, RefusesInvalidTaskFilesNamingEachOne) {
  try {
    Suite::load(kFixtures + "/bad");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("3 of 4 task files are invalid"), std::string::npos) << what;
    EXPECT_NE(what.find("'level1/001_other_name' does not match"), std::string::npos) << what;
    EXPECT_NE(what.find("unknown category 'fused' for a level-1 task"), std::string::npos) << what;
    EXPECT_NE(what.find("003_bad_spec.crl:5: unknown key 'colour'"), std::string::npos) << what;
    EXPECT_EQ(what.find("004_good"), std::string::npos) << what;
  }
}

TEST(Suite, OtherLevelsAcceptAnyLowerCaseCategory) {
  EXPECT_TRUE(is_known_category(2, "conv_transpose3d"));
  EXPECT_TRUE(is_known_category(3, "transformer"));
  EXPECT_FALSE(is_known_category(2, "Conv 2d"));
  EXPECT_FALSE(is_known_category(1, "gemm"));
}

TEST(Suite, ResolvesTheSuiteDirFromFlagThenEnvironmentThenBuildDefault) {
  EXPECT_EQ(resolve_suite_dir(kFixtures + "/degenerate"), kFixtures + "/degenerate");
  ::setenv("CRL_SUITE_DIR", (kFixtures + "/bad").c_str(), 1);
  EXPECT_EQ(resolve_suite_dir(), kFixtures + "/bad");
  EXPECT_EQ(resolve_suite_dir(kSuiteDir), kSuiteDir);  // the flag wins over the environment
  ::unsetenv("CRL_SUITE_DIR");
  EXPECT_EQ(resolve_suite_dir(), kSuiteDir);
  EXPECT_THROW(resolve_suite_dir("/no/such/suite"), InputError);
}

TEST(Suite, MetadataJsonHasShapesCostAndToleranceAtEveryScale) {
  const auto j = task_metadata_json(source_suite().find("level1/023_softmax"));
  EXPECT_EQ(j["id"], "level1/023_softmax");
  EXPECT_EQ(j["level"], 1);
  EXPECT_EQ(j["category"], "activation");
  EXPECT_EQ(j["inputs"][0]["shape_at"]["full"], (std::vector<int64_t>{4096, 393216}));
  EXPECT_DOUBLE_EQ(j["scales"]["full"]["bytes"].get<double>(), 8.0 * 4096 * 393216);
  EXPECT_TRUE(j["tolerance"]["from_spec"].get<bool>());
  EXPECT_DOUBLE_EQ(j["tolerance"]["atol"].get<double>(), 1e-10);
  EXPECT_FALSE(j["notes"].get<std::string>().empty());
  EXPECT_EQ(j["init_args"], nlohmann::json::array());
  EXPECT_EQ(j["scales"]["small"]["init_args"], "[]");
  const auto conv = task_metadata_json(source_suite().find("level2/001_conv2d_relu_bias_add"));
  EXPECT_EQ(conv["init_args"], nlohmann::json({"in_channels", "out_channels", "kernel_size", "(out_channels, 1, 1)"}));
  EXPECT_EQ(conv["scales"]["full"]["init_args"], "[64, 128, 3, (128, 1, 1)]");  // KernelBench's get_init_inputs()
  EXPECT_EQ(conv["scales"]["small"]["init_args"], "[8, 16, 3, (16, 1, 1)]");
  // KernelBench's tensors in its order: its extra bias first, held by the spec's last param.
  EXPECT_EQ(j["kernelbench_params"]["parameters"], nlohmann::json::array());
  const auto& bias = conv["kernelbench_params"]["parameters"][0];
  EXPECT_EQ(bias["name"], "bias");
  EXPECT_EQ(bias["param"], "bias");
  EXPECT_EQ(bias["shape"], nlohmann::json({"out_channels", "1", "1"}));
  EXPECT_EQ(bias["shape_at"]["small"], (std::vector<int64_t>{16, 1, 1}));
  EXPECT_TRUE(bias["transform"].is_null());
  EXPECT_TRUE(bias["unmatched"].is_null());
  const auto bn = task_metadata_json(source_suite().find("level1/033_batch_norm"))["kernelbench_params"]["buffers"];
  ASSERT_EQ(bn.size(), 3u);
  EXPECT_EQ(bn[2]["name"], "bn.num_batches_tracked");
  EXPECT_TRUE(bn[2]["param"].is_null());
  EXPECT_EQ(bn[2]["unmatched"], "BatchNorm call counter, read by no output");
}

// Every task records its KernelBench module's constructor arguments (tools/suite/add_init_args.py
// writes them; the spec parser has already evaluated them at every scale). Their agreement with
// KernelBench itself is tests/suite/init_args_kernelbench_test.py's, given a checkout.
TEST(Suite, EveryTaskRecordsItsConstructorArgumentsAtEveryScale) {
  size_t tasks = 0, with_arguments = 0;
  for (const Task* t : source_suite().select(TaskFilter{})) {
    ++tasks;
    ASSERT_TRUE(t->spec.init_args.has_value()) << t->id << ": no init_args (tools/suite/add_init_args.py adds them)";
    with_arguments += !t->spec.init_args->empty();
    for (const auto& scale : t->spec.scale_names()) {
      EXPECT_EQ(t->spec.init_args_at(scale).size(), t->spec.init_args->size()) << t->id << " " << scale;
    }
  }
  EXPECT_EQ(tasks, 250u);
  EXPECT_EQ(with_arguments, 207u);  // 43 of KernelBench's 250 modules are built without arguments
}

// Every task records how its KernelBench module declares its tensors and which param each one is
// (tools/suite/add_kernelbench_params.py writes them; the parser has checked every shape at every scale and
// that each param is one tensor's). KernelBench's order differs from the spec's in 44 tasks (docs/suite.md).
TEST(Suite, EveryTaskRecordsItsKernelBenchTensorsAndTheParamEachIs) {
  size_t with_params = 0, reordered = 0, transformed = 0, unmatched_parameters = 0, crl_only = 0;
  for (const Task* t : source_suite().select(TaskFilter{})) {
    ASSERT_TRUE(t->spec.kernelbench_params.has_value()) << t->id << ": no kernelbench_params (tools/suite/add_kernelbench_params.py)";
    const KernelBenchParams& kb = *t->spec.kernelbench_params;
    std::vector<size_t> order;
    for (const auto* list : {&kb.parameters, &kb.buffers}) {
      for (const KernelBenchTensor& tensor : *list) {
        if (tensor.param) order.push_back(*tensor.param);
        transformed += tensor.transform != KernelBenchTransform::identity;
      }
    }
    for (const KernelBenchTensor& tensor : kb.parameters) unmatched_parameters += !tensor.param;
    EXPECT_EQ(order.size() + kb.crl_only.size(), t->spec.params.size()) << t->id;
    with_params += !t->spec.params.empty();
    reordered += !std::is_sorted(order.begin(), order.end());
    crl_only += kb.crl_only.size();
  }
  EXPECT_EQ(with_params, 188u);
  EXPECT_EQ(reordered, 44u);
  EXPECT_EQ(transformed, 0u);           // every tensor has its param's shape
  EXPECT_EQ(unmatched_parameters, 1u);  // level2/026's bias, which forward never reads
  EXPECT_EQ(crl_only, 0u);
  // level2/001: KernelBench declares its bias before its convolution; the spec lists it last.
  const KernelBenchParams& conv = *source_suite().find("level2/001_conv2d_relu_bias_add").spec.kernelbench_params;
  ASSERT_EQ(conv.parameters.size(), 3u);
  EXPECT_EQ(conv.parameters[0].name, "bias");
  EXPECT_EQ(conv.parameters[0].param, std::optional<size_t>(2));
  EXPECT_EQ(conv.parameters[1].name, "conv.weight");
  EXPECT_EQ(conv.parameters[1].param, std::optional<size_t>(0));
  EXPECT_TRUE(conv.buffers.empty());
}

}  // namespace
}  // namespace crl
