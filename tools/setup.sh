#!/usr/bin/env bash
# Makes a fresh Debian 12 / Ubuntu 24.04 machine ready for crl, then configures and builds it.
# Usage: tools/setup.sh            builds what `crl run` needs (crl, crl-worker)
#        tools/setup.sh --tests    builds everything: the tests and benchmarks too (README's test command)
#        (idempotent; quick when everything is already there)
# Env:   CRL_HOME (default ~/.local/share/crl) holds the torch==2.11.0 venv shared by every clone.
#        CRL_BUILD_DIR (default build), CRL_SKIP_BUILD=1 to stop after installing.
#        CRL_CXX / CRL_CC: the compilers of a new build folder (default clang++/clang where they work).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=(crl crl-worker)  # crl pulls in crl_exec, the static front (apps/crl/CMakeLists.txt)
case "${1:-}" in
  --tests) TARGETS=(all) ;;
  "") ;;
  *) echo "setup: unknown argument '$1' (usage: tools/setup.sh [--tests])" >&2; exit 3 ;;
esac

CRL_HOME=${CRL_HOME:-$HOME/.local/share/crl}
BUILD_DIR=${CRL_BUILD_DIR:-build}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv python3-dev
  libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libutf8proc-dev
  clang libclang-rt-dev lld)  # clang: programs' host sections (2-4x faster compiles than g++), the fuzzers (tools/fuzz.sh)
# lld: links crl's programs in a fifth of ld.bfd's time (cmake/CrlLinker.cmake)
# clang 19, where the distribution packages it (Debian 12 does): load_inline's CUDA sources with
# precompiled torch headers (lib/compile/clang_cuda.h), where nvcc takes 20-40 s an extension.
# Without it nvcc builds them, so a failed install only says so.
OPTIONAL_PACKAGES=(clang-19)
# A one-node local Slurm for slurm/*.sbatch and the tests labelled slurm: tools/slurm-local.sh.
APT_PACKAGES+=(slurm-wlm munge)
# Headless Chromium opens `crl report`'s page in tests/report (Ubuntu's chromium is a snap stub: skipped there).
grep -qs '^ID=debian' /etc/os-release && APT_PACKAGES+=(chromium)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
for p in "${OPTIONAL_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$p" >/dev/null 2>&1 ||
    echo "setup: $p did not install (not packaged here?): nvcc alone builds load_inline's CUDA sources"
done

# LibTorch: an existing Torch_DIR / CMAKE_PREFIX_PATH wins; otherwise the shared venv's torch.
torch_ok() { "$1" -c 'import torch,sys; sys.exit(0 if torch.__version__.startswith("2.11") else 1)' 2>/dev/null; }
VENV_PY="$CRL_HOME/venv/bin/python3"
if [ -z "${Torch_DIR:-}" ] && ! torch_ok "$VENV_PY"; then
  echo "setup: installing torch==2.11.0 from PyPI into $CRL_HOME/venv (once per machine, ~4 GB)"
  mkdir -p "$CRL_HOME"
  python3 -m venv "$CRL_HOME/venv"
  "$CRL_HOME/venv/bin/pip" install -q --upgrade pip
  "$CRL_HOME/venv/bin/pip" install -q torch==2.11.0 numpy
fi
# Offline analysis tools (tools/analysis, `crl report`) read HDF5, tabulate and plot.
if torch_ok "$VENV_PY" && ! "$VENV_PY" -c 'import h5py, matplotlib, pandas' 2>/dev/null; then
  "$CRL_HOME/venv/bin/pip" install -q h5py matplotlib pandas
fi

# tensorboardX: tools/analysis/crl_tensorboard.py writes a run's curves for TensorBoard with it.
if torch_ok "$VENV_PY" && ! "$VENV_PY" -c 'import tensorboardX' 2>/dev/null; then
  "$CRL_HOME/venv/bin/pip" install -q tensorboardX || echo "setup: tensorboardX did not install: crl_tensorboard.py will say so"
fi

# Hugging Face's own libraries, for the tests that check crl against them (transformers loads crl's
# checkpoints, peft its adapters, safetensors reads its files, tokenizers makes golden data).
if torch_ok "$VENV_PY" && ! "$VENV_PY" -c 'import transformers, peft, safetensors, tokenizers' 2>/dev/null; then
  "$CRL_HOME/venv/bin/pip" install -q transformers peft safetensors tokenizers
fi
# lizard: the code gate's function length and complexity (tools/code_gate.sh).
if torch_ok "$VENV_PY" && [ ! -x "$CRL_HOME/venv/bin/lizard" ]; then
  "$CRL_HOME/venv/bin/pip" install -q lizard
fi

# atheris: the fuzzer of the analysis code's harness (tests/fuzz/fuzz_results_py.py; tools/fuzz.sh
# skips it, saying so, without).
if torch_ok "$VENV_PY" && ! "$VENV_PY" -c 'import atheris' 2>/dev/null; then
  "$CRL_HOME/venv/bin/pip" install -q atheris || echo "setup: atheris did not install: tools/fuzz.sh will skip fuzz_results_py"
fi

[ "${CRL_SKIP_BUILD:-0}" = 1 ] && exit 0
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # The compilers (tools/choose_compilers.sh): clang where it works, else the system's c++.
  # shellcheck disable=SC2046  # two words: the compiler options
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tools/choose_compilers.sh)
fi
# Only what is asked for: the tests and benchmarks are ~270 of the tree's ~310 targets and most of
# its compile time (issue 44: 28 minutes of a fresh 2-core machine's 31 were theirs).
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${TARGETS[@]}"
