// clang's CUDA mode for load_inline's cuda.cu: flag translation and the driver's jobs rewritten
// for precompiled headers (clang_cuda.h).
#include "compile/clang_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace crl {
namespace {

std::string after(std::string_view s, std::string_view prefix) { return std::string(s.substr(prefix.size())); }

// ptxas takes a list of values in one -Xptxas/--ptxas-options entry, separated by commas.
void add_ptxas_values(const std::string& values, ClangCudaFlags* out) {
  size_t start = 0;
  while (start <= values.size()) {
    const size_t comma = std::min(values.find(',', start), values.size());
    if (comma > start) out->ptxas.push_back(values.substr(start, comma - start));
    start = comma + 1;
  }
}

void add_fast_division(ClangCudaFlags* out) {
  // nvcc's --prec-div=false: div.full.f32 (2 ulp) for a / b, as nvcc emits it.
  for (const char* f : {"-mllvm", "-nvptx-prec-divf32=1"}) out->device_cc1.push_back(f);
}

void add_fast_sqrt(ClangCudaFlags* out) {
  for (const char* f : {"-mllvm", "-nvptx-prec-sqrtf32=0"}) out->device_cc1.push_back(f);
}

void add_flush_to_zero(ClangCudaFlags* out) { out->device_cc1.push_back("-fdenormal-fp-math-f32=preserve-sign,preserve-sign"); }

// One nvcc flag into `out`; false when it has no counterpart here.
bool translate_flag(const std::string& f, ClangCudaFlags* out) {
  static constexpr std::string_view no_effect[] = {"-lineinfo", "--expt-relaxed-constexpr", "--expt-extended-lambda",
                                                   "--extended-lambda", "--restrict", "-std=c++14", "-std=c++17",
                                                   "--ftz=false", "--fmad=true", "-prec-div=true", "--prec-div=true",
                                                   "-prec-sqrt=true", "--prec-sqrt=true"};
  if (std::find(std::begin(no_effect), std::end(no_effect), f) != std::end(no_effect)) return true;
  // Code-generation levels (the extension is built at -O3, ptxas at its own default -O3) and the
  // target (crl builds for the GPU it judges on).
  for (const std::string_view prefix : {"-O", "-arch=", "--gpu-architecture=", "-gencode="}) {
    if (std::string_view(f).starts_with(prefix)) return true;
  }
  if (f == "--use_fast_math" || f == "-use_fast_math") {
    out->approx_transcendentals = true;
    add_flush_to_zero(out);
    add_fast_division(out);
    add_fast_sqrt(out);
    return true;
  }
  if (f == "--ftz=true") return add_flush_to_zero(out), true;
  if (f == "-prec-div=false" || f == "--prec-div=false") return add_fast_division(out), true;
  if (f == "-prec-sqrt=false" || f == "--prec-sqrt=false") return add_fast_sqrt(out), true;
  if (f == "--fmad=false") return out->device_cc1.push_back("-ffp-contract=off"), true;
  for (const std::string_view prefix : {"-Xptxas=", "--ptxas-options="}) {
    if (std::string_view(f).starts_with(prefix)) return add_ptxas_values(after(f, prefix), out), true;
  }
  for (const std::string_view prefix : {"-maxrregcount=", "--maxrregcount="}) {
    if (std::string_view(f).starts_with(prefix)) return out->ptxas.insert(out->ptxas.end(), {"--maxrregcount", after(f, prefix)}), true;
  }
  if (std::string_view(f).starts_with("-D") || std::string_view(f).starts_with("-U")) return out->driver.push_back(f), true;
  return false;
}

// The index before which a cc1 job's added options go: its input's "-x LANGUAGE" (options after
// the job's own, so a later one of the same kind wins), else the end.
size_t options_end(const std::vector<std::string>& job) {
  for (size_t i = job.size(); i-- > 1;) {
    if (job[i] == "-x") return i;
  }
  return job.size();
}

bool is_tool(const std::vector<std::string>& job, std::string_view name) {
  if (job.empty()) return false;
  const std::string& program = job[0];
  const size_t slash = program.rfind('/');
  return std::string_view(program).substr(slash == std::string::npos ? 0 : slash + 1) == name;
}

// "--image=profile=sm_90a,file=F" -> "--image3=kind=elf,sm=90a,file=F"; compute_ -> kind=ptx.
std::string image3(const std::string& arg) {
  static constexpr std::string_view head = "--image=profile=";
  const size_t comma = arg.find(',');
  if (!std::string_view(arg).starts_with(head) || comma == std::string::npos) return arg;
  const std::string profile = arg.substr(head.size(), comma - head.size());
  const bool ptx = std::string_view(profile).starts_with("compute_");
  const std::string sm = profile.substr(profile.find('_') + 1);
  return fmt::format("--image3=kind={},sm={}{}", ptx ? "ptx" : "elf", sm, arg.substr(comma));
}

}  // namespace

const char* const kClangCudaPrelude =
    "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#include <torch/extension.h>\n"
    "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n";

std::optional<ClangCudaFlags> clang_cuda_flags(const std::vector<std::string>& nvcc_flags, std::string* why) {
  ClangCudaFlags out;
  for (size_t i = 0; i < nvcc_flags.size(); ++i) {
    const std::string& f = nvcc_flags[i];
    if (f == "-Xptxas" && i + 1 < nvcc_flags.size()) {
      add_ptxas_values(nvcc_flags[++i], &out);
      continue;
    }
    if (!translate_flag(f, &out)) {
      if (why != nullptr) *why = fmt::format("nvcc's flag '{}' has no clang counterpart here", f.substr(0, 80));
      return std::nullopt;
    }
  }
  return out;
}

std::vector<std::vector<std::string>> parse_driver_jobs(const std::string& output) {
  std::vector<std::vector<std::string>> jobs;
  size_t line_start = 0;
  while (line_start < output.size()) {
    size_t line_end = output.find('\n', line_start);
    if (line_end == std::string::npos) line_end = output.size();
    const std::string_view line(output.data() + line_start, line_end - line_start);
    if (std::string_view(line).starts_with(" \"")) {
      // clang quotes each argument and escapes ", \ and $ with a backslash.
      std::vector<std::string> job;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] != '"') continue;
        std::string arg;
        for (++i; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          arg += line[i];
        }
        job.push_back(std::move(arg));
      }
      if (!job.empty()) jobs.push_back(std::move(job));
    }
    line_start = line_end + 1;
  }
  return jobs;
}

bool is_cc1(const std::vector<std::string>& job) { return job.size() > 1 && job[1] == "-cc1"; }

bool is_device_cc1(const std::vector<std::string>& job) {
  return is_cc1(job) && std::find(job.begin(), job.end(), "-fcuda-is-device") != job.end();
}

std::vector<std::vector<std::string>> pch_emitting_jobs(const std::vector<std::vector<std::string>>& jobs,
                                                        const std::string& device_pch, const std::string& host_pch) {
  std::vector<std::vector<std::string>> out;
  for (const auto& job : jobs) {
    if (!is_cc1(job)) continue;
    std::vector<std::string> pch_job;
    for (size_t i = 0; i < job.size(); ++i) {
      if (job[i] == "-emit-obj" || job[i] == "-S") continue;
      if (job[i] == "-fcuda-include-gpubinary") {
        ++i;  // the host side embeds no device code into a header
        continue;
      }
      pch_job.push_back(job[i]);
      if (job[i] == "-o" && i + 1 < job.size()) {
        pch_job.push_back(is_device_cc1(job) ? device_pch : host_pch);
        ++i;
      }
    }
    pch_job.insert(pch_job.begin() + 2, {"-emit-pch", "-fpch-instantiate-templates"});
    out.push_back(std::move(pch_job));
  }
  return out;
}

std::vector<std::vector<std::string>> jobs_with_pch(std::vector<std::vector<std::string>> jobs, const std::string& device_pch,
                                                    const std::string& host_pch, const ClangCudaFlags& flags, int cuda_major) {
  for (auto& job : jobs) {
    if (is_cc1(job)) {
      const bool device = is_device_cc1(job);
      if (device) job.insert(job.begin() + static_cast<long>(options_end(job)), flags.device_cc1.begin(), flags.device_cc1.end());
      job.insert(job.begin() + 2, {"-include-pch", device ? device_pch : host_pch});
    } else if (is_tool(job, "ptxas") && !flags.ptxas.empty()) {
      // A level of the candidate's (-O2) replaces the driver's; the input file stays last.
      const bool own_level = std::any_of(flags.ptxas.begin(), flags.ptxas.end(), [](const std::string& f) { return std::string_view(f).starts_with("-O"); });
      if (own_level) job.erase(std::remove_if(job.begin() + 1, job.end(), [](const std::string& f) { return std::string_view(f).starts_with("-O"); }), job.end());
      job.insert(job.end() - 1, flags.ptxas.begin(), flags.ptxas.end());
    } else if (is_tool(job, "fatbinary") && cuda_major >= 13) {
      for (auto& arg : job) arg = image3(arg);
    }
  }
  return jobs;
}

std::vector<std::pair<std::string, std::string>> clang_cuda_shim_headers(ExtensionHeaders headers) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"texture_fetch_functions.h", "// crl: CUDA 13 removed texture references; clang's CUDA wrapper still includes this.\n"}};
  if (headers == ExtensionHeaders::light) files.emplace_back("torch/extension.h", kLightTorchExtensionHeader);
  return files;
}

}  // namespace crl
