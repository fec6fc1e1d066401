// Tests of the compiler on the CPU backend: references and candidates run through crl_forward,
// compile errors name the .crl line, the cache hits and misses, concurrent compiles agree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "compile/compile_cache.h"
#include "compile/compiler.h"
#include "core/landlock.h"
#include "compile/loaded_program.h"
#include "compile/toolchain.h"
#include "compile/torch_extension.h"
#include "compile_test_util.h"
#include "core/error.h"
#include "core/subprocess.h"
#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl {
namespace {

using testing::request_for;
using testing::test_cache_dir;
using testing::test_options;
using testing::unique_tag;

std::string relu_reference(const std::string& tag) {
  return "// crl:spec\n"
         "task: level1/019_relu\n"
         "category: activation\n"
         "inputs:\n"
         "  - {name: x, shape: [batch, dim], dtype: float32, init: randn}\n"
         "scales:\n"
         "  small: {batch: 16, dim: 4096}\n"
         "flops: batch * dim\n"
         "bytes: 8 * batch * dim\n"
         "// crl:host\n"
         "// " + tag + "\n"
         "at::Tensor forward(const at::Tensor& x) { return at::relu(x); }\n";
}

Compiler& shared_compiler() {
  static Compiler compiler(test_options());
  return compiler;
}

TEST(CompilerCpu, ReferenceComputesReluThroughCrlForward) {
  const std::string text = relu_reference(unique_tag());
  const ProgramText program = parse_program_text(text, "relu.crl");
  const TaskSpec spec = parse_task_spec(program.spec, program.origin);
  CompileRequest request{program, spec.num_args(), Backend::cpu, ""};
  const CompileResult result = shared_compiler().compile(request);
  ASSERT_TRUE(result.ok) << result.log;
  EXPECT_FALSE(result.cache_hit);
  EXPECT_EQ(result.key.size(), 64u);
  EXPECT_TRUE(std::filesystem::exists(result.library_path));
  const LoadedProgram loaded(result.library_path);
  EXPECT_EQ(loaded.abi_version(), program_abi_version());
  const auto args = make_arguments(spec, "small", 11, at::Device(at::kCPU));
  const auto outputs = loaded.forward(args);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(at::equal(outputs[0], at::relu(args[0])));
  // The wrong argument count and a failing TORCH_CHECK come back as crl::Error with the text.
  try {
    loaded.forward({args[0], args[0]});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("forward takes 1 arguments but 2 were passed"), std::string::npos) << e.what();
  }
}

TEST(CompilerCpu, CandidateWithDeviceSectionAndTupleReturn) {
  const std::string text =
      "// a CPU candidate: OpenMP kernel in the device section, two outputs\n"
      "// crl:device\n"
      "extern \"C\" void scaled_relu(const float* x, float* y, float* z, int64_t n) {\n"
      "  #pragma omp parallel for simd\n"
      "  for (int64_t i = 0; i < n; ++i) { y[i] = x[i] > 0.f ? x[i] : 0.f; z[i] = 2.f * x[i]; }\n"
      "}\n"
      "// crl:host\n"
      "// " + unique_tag() + "\n"
      "extern \"C\" void scaled_relu(const float* x, float* y, float* z, int64_t n);\n"
      "std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& w) {\n"
      "  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, \"x must be contiguous float32\");\n"
      "  at::Tensor y = at::empty_like(x), z = at::empty_like(x);\n"
      "  scaled_relu(x.data_ptr<float>(), y.data_ptr<float>(), z.data_ptr<float>(), x.numel());\n"
      "  return {y, z + w};\n"
      "}\n";
  const CompileResult result = shared_compiler().compile(request_for(text, 2, Backend::cpu, "cand.crl"));
  ASSERT_TRUE(result.ok) << result.log;
  // Both halves' objects stay beside the library, for the symbol guard.
  ASSERT_EQ(result.object_paths.size(), 2u);
  EXPECT_TRUE(result.object_paths[0].ends_with("/host.o") && std::filesystem::exists(result.object_paths[0]));
  EXPECT_TRUE(result.object_paths[1].ends_with("/device.o") && std::filesystem::exists(result.object_paths[1]));
  const LoadedProgram loaded(result.library_path);
  const at::Tensor x = at::randn({1000});
  const at::Tensor w = at::randn({1000});
  const auto out = loaded.forward({x, w});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(at::equal(out[0], at::relu(x)));
  EXPECT_TRUE(at::allclose(out[1], 2 * x + w));
  try {
    loaded.forward({x.to(at::kDouble), w});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x must be contiguous float32"), std::string::npos) << e.what();
  }
}

TEST(CompilerCpu, VectorReturn) {
  const std::string text = "// crl:host\n// " + unique_tag() +
                           "\nstd::vector<at::Tensor> forward(const at::Tensor& x) { return {x + 1, x * 3, x.sum()}; }\n";
  const CompileResult result = shared_compiler().compile(request_for(text, 1, Backend::cpu));
  ASSERT_TRUE(result.ok) << result.log;
  const auto out = LoadedProgram(result.library_path).forward({at::ones({4})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].item<float>(), 4.f);
}

TEST(CompilerCpu, CompileErrorsNameTheCrlFileLineAndAreCached) {
  const std::string text =
      "// crl:host\n"                                                       // 1
      "// " + unique_tag() + "\n"                                           // 2
      "at::Tensor forward(const at::Tensor& x) {\n"                         // 3
      "  return at::relu(x) + undefined_thing;\n"                           // 4
      "}\n";
  const CompileResult result = shared_compiler().compile(request_for(text, 1, Backend::cpu, "bad.crl"));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.stage, "host");
  EXPECT_TRUE(result.library_path.empty());
  EXPECT_NE(result.log.find("bad.crl:4:"), std::string::npos) << result.log;
  EXPECT_NE(result.log.find("undefined_thing"), std::string::npos) << result.log;
  // A failed compile is cached too; the log is rewritten to the new request's origin.
  const CompileResult again = shared_compiler().compile(request_for(text, 1, Backend::cpu, "again.crl"));
  EXPECT_TRUE(again.cache_hit);
  EXPECT_FALSE(again.ok);
  EXPECT_NE(again.log.find("again.crl:4:"), std::string::npos) << again.log;
  EXPECT_EQ(again.key, result.key);
}

// The attack: include a file of the machine's so that the compiler prints it into the log (and
// from there into the verdict and the results file). Each variant is refused before any compiler
// runs; the legitimate twin (a toolchain header by a relative path) still compiles.
TEST(CompilerCpu, IncludingFilesOutsideTheToolchainIsRefusedBeforeCompiling) {
  const std::string secret = "/tmp/crl-include-attack-" + unique_tag();
  { std::ofstream(secret) << "the secret text\n"; }
  for (const std::string& directive :
       {"#include \"" + secret + "\"", "#include <" + secret + ">", "  #  include_next \"../../../../" + secret + "\"",
        "#if __has_include(\"" + secret + "\")\n#endif", "asm(\".incbin \\\"" + secret + "\\\"\");"}) {
    const std::string text = "// crl:host\n" + directive + "\nat::Tensor forward(const at::Tensor& x) { return x.clone(); }\n";
    const CompileResult r = shared_compiler().compile(request_for(text, 1, Backend::cpu, "attack.crl"));
    EXPECT_FALSE(r.ok) << directive;
    EXPECT_EQ(r.log.find("the secret text"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("attack.crl:2: crl: programs may include the toolchain's headers only"), std::string::npos)
        << directive << "\n" << r.log;
  }
  const CompileResult legit = shared_compiler().compile(request_for(
      "// crl:host\n#include <cmath>\n#include \"ATen/ATen.h\"\nat::Tensor forward(const at::Tensor& x) { return x.clone(); }\n", 1,
      Backend::cpu, "legit.crl"));
  EXPECT_TRUE(legit.ok) << legit.log;
  std::filesystem::remove(secret);
}

// What the textual check cannot see: a file named through a macro, a directive split across a line
// splice or spelled with a digraph, an assembler directive assembled from string pieces. The
// compilers run in a Landlock sandbox that reads only the toolchain, the prelude and the program,
// so each fails without the file's text in its log; the legitimate twin above still compiles.
TEST(CompilerCpu, FilesNamedAroundTheTextualCheckStayOutOfTheCompilersReach) {
  if (landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock: compiles run without their sandbox here";
  const std::string secret = "/tmp/crl-include-attack-" + unique_tag();
  { std::ofstream(secret) << "the secret text\n"; }
  for (const std::string& directive :
       {"#define CRL_SECRET \"" + secret + "\"\n#include CRL_SECRET", "#define S(x) #x\n#define X(x) S(x)\n#include X(" + secret + ")",
        "#inc\\\nlude \"" + secret + "\"", "%:include \"" + secret + "\"", "asm(\".inc\" \"bin \\\"" + secret + "\\\"\");",
        "asm(\".inc\" \"lude \\\"" + secret + "\\\"\");", std::string("#define Z \"/dev/zero\"\n#include Z")}) {
    const std::string text = "// crl:host\n" + directive + "\nat::Tensor forward(const at::Tensor& x) { return x.clone(); }\n";
    const CompileResult r = shared_compiler().compile(request_for(text, 1, Backend::cpu, "attack.crl"));
    EXPECT_FALSE(r.ok) << directive;
    EXPECT_EQ(r.log.find("the secret text"), std::string::npos) << directive << "\n" << r.log;
  }
  std::filesystem::remove(secret);
}

TEST(CompilerCpu, LongCompilerLogsAreCutAndSaySo) {
  CompilerOptions options = test_options(1);
  options.max_log_bytes = 300;
  Compiler compiler(options);
  std::string text = "// crl:host\n// " + unique_tag() + "\nat::Tensor forward(const at::Tensor& x) {\n";
  for (int i = 0; i < 20; ++i) text += "  undefined_" + std::to_string(i) + "();\n";
  text += "  return x;\n}\n";
  const CompileResult result = compiler.compile(request_for(text, 1, Backend::cpu, "long.crl"));
  EXPECT_FALSE(result.ok);
  EXPECT_LT(result.log.size(), 400u);
  EXPECT_NE(result.log.find("more bytes of compiler output cut]"), std::string::npos) << result.log;
  EXPECT_NE(result.log.find("long.crl:4:"), std::string::npos) << result.log;  // the first error survives
}

// A fake host compiler that never finishes a source holding the marker and hands everything else to
// the real one (clang++ where there is one: its prelude, which this fake must build on its own key,
// takes a third of g++'s ~45 s): the timeout then fires for certain, whatever the machine's speed
// (g++'s own constexpr step limit once won the race against a 1 s timeout).
std::string slow_fake_compiler() {
  const std::string real = find_on_path("clang++").empty() ? "g++" : "clang++";
  std::filesystem::create_directories(testing::test_cache_dir());
  const std::string path = testing::test_cache_dir() + "/fake-slow-" + real;
  std::ofstream(path) << "#!/bin/sh\n"
                         "for a in \"$@\"; do\n"
                         "  case \"$a\" in *.cpp) grep -q CRL_NEVER_FINISHES_COMPILING \"$a\" && exec sleep 600;; esac\n"
                         "done\n"
                         "exec " << real << " \"$@\"\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(CompilerCpu, TimedOutCompilesAreRememberedForTheirTimeLimit) {
  CompilerOptions options = test_options(1);
  options.host_cxx = slow_fake_compiler();  // the host section is the one that never finishes
  options.timeout_seconds = 1;
  Compiler compiler(options);
  compiler.prepare(Backend::cpu);  // the prelude (built here on a fresh cache) has its own timeout
  const std::string text = "// crl:host\n// CRL_NEVER_FINISHES_COMPILING " + unique_tag() +
                           "\nat::Tensor forward(const at::Tensor& x) { return x; }\n";
  const CompileResult result = compiler.compile(request_for(text, 1, Backend::cpu));
  EXPECT_FALSE(result.ok);
  EXPECT_FALSE(result.cache_hit);
  EXPECT_EQ(result.stage, "host");
  EXPECT_NE(result.log.find("[crl: host compile timed out]"), std::string::npos) << result.log;
  EXPECT_LT(result.seconds, 30);
  // Under the same limit it is not compiled again: the remembered timeout comes back at once.
  const CompileResult again = compiler.compile(request_for(text, 1, Backend::cpu));
  EXPECT_FALSE(again.ok);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.stage, "host");
  EXPECT_NE(again.log.find("timed out under a 1 s limit before"), std::string::npos) << again.log;
  EXPECT_LT(again.seconds, 0.5);
  // A longer limit tries again (and times out again: the fake never finishes).
  options.timeout_seconds = 2;
  Compiler patient(options);
  const CompileResult longer = patient.compile(request_for(text, 1, Backend::cpu));
  EXPECT_FALSE(longer.cache_hit);
  EXPECT_NE(longer.log.find("[crl: host compile timed out]"), std::string::npos) << longer.log;
  EXPECT_GE(longer.seconds, 2);
}

// Host sections compile with clang++ where it can stand in for g++ (its precompiled prelude keeps
// ATen's instantiated templates, which g++ redoes in every program), or with g++ when told: both
// give a working library, under different cache keys.
TEST(CompilerCpu, HostSectionsCompileWithClangOrGccUnderTheirOwnKeys) {
  if (find_on_path("clang++").empty()) GTEST_SKIP() << "clang++ is not on PATH (tools/setup.sh installs it)";
  const std::string text = relu_reference(unique_tag());
  std::vector<std::string> keys;
  for (const std::string host : {"clang++", "g++"}) {
    CompilerOptions options = test_options(1);
    options.host_cxx = host;
    Compiler compiler(options);
    const CompileResult result = compiler.compile(request_for(text, 1, Backend::cpu));
    ASSERT_TRUE(result.ok) << host << ": " << result.log;
    EXPECT_FALSE(result.cache_hit) << host;
    const LoadedProgram loaded(result.library_path);
    EXPECT_EQ(loaded.abi_version(), program_abi_version()) << host;
    keys.push_back(result.key);
  }
  EXPECT_NE(keys[0], keys[1]);
  // Left to choose, the compiler takes clang++ here (the probe passes on this machine).
  EXPECT_TRUE(clang_can_compile_host(find_on_path("clang++"), find_on_path("g++"), test_cache_dir()));
  CompilerOptions automatic = test_options(1);
  automatic.host_cxx = "auto";
  Compiler chooser(automatic);
  const CompileResult chosen = chooser.compile(request_for(text, 1, Backend::cpu));
  EXPECT_TRUE(chosen.cache_hit);
  EXPECT_EQ(chosen.key, keys[0]);
}

TEST(CompilerCpu, AHostCompilerThatCannotStandInIsNotChosen) {
  EXPECT_FALSE(clang_can_compile_host("/bin/false", find_on_path("g++"), test_cache_dir()));
  CompilerOptions options = test_options(1);
  options.host_cxx = "no-such-compiler-" + unique_tag();
  EXPECT_THROW(Compiler{options}, InputError);
}

TEST(CompilerCpu, DeviceErrorsNameTheCrlFileLine) {
  const std::string text =
      "// crl:device\n"                                        // 1
      "extern \"C\" void k(float* y) {\n"                      // 2
      "  y[0] = missing_function(1.f);\n"                      // 3
      "}\n"                                                    // 4
      "// crl:host\n"                                          // 5
      "// " + unique_tag() + "\n"
      "at::Tensor forward(const at::Tensor& x) { return x.clone(); }\n";
  const CompileResult result = shared_compiler().compile(request_for(text, 1, Backend::cpu, "dev.crl"));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.stage, "device");
  EXPECT_NE(result.log.find("dev.crl:3:"), std::string::npos) << result.log;
}

TEST(CompilerCpu, WrongArityAndUndefinedLauncherFailAtCompileTime) {
  const std::string tag = unique_tag();
  const std::string two_args = "// crl:host\n// " + tag +
                               "\nat::Tensor forward(const at::Tensor& x, const at::Tensor& y) { return x + y; }\n";
  const CompileResult arity = shared_compiler().compile(request_for(two_args, 3, Backend::cpu));
  EXPECT_FALSE(arity.ok);
  EXPECT_NE(arity.log.find("forward"), std::string::npos) << arity.log;
  const std::string undefined = "// crl:host\n// " + tag +
                                "\nextern \"C\" void nowhere(float*);\n"
                                "at::Tensor forward(const at::Tensor& x) { auto y = x.clone(); nowhere(y.data_ptr<float>()); return y; }\n";
  const CompileResult link = shared_compiler().compile(request_for(undefined, 1, Backend::cpu));
  EXPECT_FALSE(link.ok);
  EXPECT_EQ(link.stage, "link");
  EXPECT_NE(link.log.find("nowhere"), std::string::npos) << link.log;
}

TEST(CompilerCpu, CacheHitsForTheSameProgramAndMissesForAnother) {
  const std::string text = relu_reference(unique_tag());
  const CompileResult first = shared_compiler().compile(request_for(text, 1, Backend::cpu));
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cache_hit);
  // A new Compiler (as a new process would have) finds the entry.
  Compiler fresh(test_options());
  const CompileResult second = fresh.compile(request_for(text, 1, Backend::cpu, "elsewhere.crl"));
  EXPECT_TRUE(second.cache_hit);
  EXPECT_TRUE(second.ok);
  EXPECT_EQ(second.library_path, first.library_path);
  EXPECT_EQ(second.object_paths, first.object_paths);
  EXPECT_EQ(second.object_paths.size(), 1u);  // a reference has no device section
  // The spec section does not matter to the compiled library; the host text and arity do.
  std::string other = text;
  other.replace(other.find("at::relu(x)"), 11, "at::relu(x) * 1");
  EXPECT_NE(fresh.key_of(request_for(other, 1, Backend::cpu)), first.key);
  EXPECT_NE(fresh.key_of(request_for(text, 2, Backend::cpu)), first.key);
  const CompileResult third = fresh.compile(request_for(other, 1, Backend::cpu));
  EXPECT_FALSE(third.cache_hit);
  EXPECT_NE(third.library_path, first.library_path);
}

TEST(CompilerCpu, ConcurrentCompilesOfOneProgramFromThreadsGiveOneLibrary) {
  const std::string text = relu_reference(unique_tag());
  std::vector<std::future<CompileResult>> direct;
  for (int i = 0; i < 3; ++i) {
    direct.push_back(std::async(std::launch::async, [&text] {
      Compiler own(test_options(1));
      return own.compile(request_for(text, 1, Backend::cpu));
    }));
  }
  std::vector<std::future<CompileResult>> pooled;
  for (int i = 0; i < 3; ++i) pooled.push_back(shared_compiler().submit(request_for(text, 1, Backend::cpu)));
  int compiled = 0;
  std::string path;
  for (auto* list : {&direct, &pooled}) {
    for (auto& f : *list) {
      const CompileResult r = f.get();
      ASSERT_TRUE(r.ok) << r.log;
      compiled += r.cache_hit ? 0 : 1;
      if (path.empty()) path = r.library_path;
      EXPECT_EQ(r.library_path, path);
    }
  }
  EXPECT_EQ(compiled, 1);
  const auto out = LoadedProgram(path).forward({-at::ones({3})});
  EXPECT_TRUE(at::equal(out[0], at::zeros({3})));
}

TEST(CompilerCpu, ConcurrentCompilesFromTwoProcessesGiveOneLibrary) {
  const std::string dir = testing::test_cache_dir() + "/programs";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/two-process-" + unique_tag() + ".crl";
  {
    std::ofstream out(file);
    out << relu_reference(unique_tag());
  }
  const std::string helper = std::string(CRL_BINARY_DIR) + "/tests/compile/compile_helper";
  const auto run = [&] {
    return run_command({helper, file, testing::test_cache_dir(), "cpu", "1"}, {.timeout = std::chrono::minutes(5)});
  };
  auto a = std::async(std::launch::async, run);
  auto b = std::async(std::launch::async, run);
  const CommandResult ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra.ok()) << ra.output;
  ASSERT_TRUE(rb.ok()) << rb.output;
  // Each helper prints "ok <cache_hit> <library_path>".
  EXPECT_EQ(ra.output.substr(0, 3), "ok ");
  const auto path_of = [](const std::string& s) { return s.substr(s.rfind(' ') + 1, s.find('\n') - s.rfind(' ') - 1); };
  EXPECT_EQ(path_of(ra.output), path_of(rb.output));
  const int hits = (ra.output.rfind("ok 1 ", 0) == 0) + (rb.output.rfind("ok 1 ", 0) == 0);
  EXPECT_EQ(hits, 1) << ra.output << rb.output;
  const auto out = LoadedProgram(path_of(ra.output)).forward({at::full({2}, -3.f)});
  EXPECT_TRUE(at::equal(out[0], at::zeros({2})));
}

// A load_inline extension's main.cpp compiles with the light torch/extension.h first (its
// precompiled header built once, its shim beside it); a C++ source that needs torch's C++ frontend
// (torch::nn) builds with torch's own, and a genuine error stays the candidate's compile error.
TEST(CompilerCpu, AnExtensionThatNeedsTorchsFrontendBuildsWithTorchsOwnHeader) {
  const std::string tag = unique_tag();
  ExtensionRequest plain;
  plain.origin = "cand.py";
  plain.name = "plain_ext";
  plain.cpp_source = "torch::Tensor f(torch::Tensor x) { return x.relu(); }  // " + tag;
  plain.functions = {"f"};
  const CompileResult light = shared_compiler().compile_extension(plain);
  if (!light.ok && light.stage == "request") GTEST_SKIP() << light.log;  // a crl without Python's headers
  ASSERT_TRUE(light.ok) << light.log;
  bool light_header_built = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(test_cache_dir())) {
    if (entry.path().filename() == "extension.h" && entry.path().parent_path().filename() == "torch" &&
        std::filesystem::exists(entry.path().parent_path().parent_path().parent_path() / "crl_extension_prelude.h")) {
      light_header_built = true;
    }
  }
  EXPECT_TRUE(light_header_built) << "no precompiled light torch/extension.h under " << test_cache_dir();

  ExtensionRequest frontend = plain;
  frontend.name = "frontend_ext";
  frontend.cpp_source = "torch::Tensor f(torch::Tensor x) { return torch::nn::functional::relu(x); }  // " + tag;
  const CompileResult own = shared_compiler().compile_extension(frontend);
  ASSERT_TRUE(own.ok) << own.log;

  ExtensionRequest typo = plain;
  typo.name = "typo_ext";
  typo.cpp_source = "torch::Tensor f(torch::Tensor x) { return torch::no_such_op(x); }  // " + tag;
  const CompileResult bad = shared_compiler().compile_extension(typo);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.stage, "host") << bad.log;
  EXPECT_NE(bad.log.find("no_such_op"), std::string::npos) << bad.log;
}

TEST(CompilerCpu, RequestsAreValidated) {
  EXPECT_THROW(shared_compiler().compile(request_for(relu_reference("x"), 0, Backend::cpu)), InputError);
  CompileRequest bad_arch = request_for(relu_reference("y"), 1, Backend::cuda);
  bad_arch.cuda_arch = "sm_90a -Xcompiler -evil";
  if (!find_on_path("nvcc").empty()) EXPECT_THROW(shared_compiler().key_of(bad_arch), InputError);
  EXPECT_THROW(parse_backend("gpu"), InputError);
  EXPECT_EQ(parse_backend("cuda"), Backend::cuda);
}

TEST(LoadedProgram, RefusesLibrariesThatAreNotPrograms) {
  EXPECT_THROW(LoadedProgram("/nonexistent/program.so"), IoError);
  EXPECT_THROW(LoadedProgram("libm.so.6"), InputError);
}

}  // namespace
}  // namespace crl
