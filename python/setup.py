"""Build of the convred PyTorch extension (torch.utils.cpp_extension.CUDAExtension).

    pip install --no-build-isolation ./python      # from the repository root; needs torch with CUDA and nvcc

--no-build-isolation: the extension is compiled against the torch already installed (its headers and
ABI); an isolated build would download another torch. Environment:
  CONVRED_CUDA_ARCH   architectures, ';' or ',' separated (default "90a;80": Hopper's wgmma path and
                      Ampere+ mma.sync; e.g. "90a" alone halves the compile time)
  MAX_JOBS            parallel compiler processes (ninja), as usual for torch extensions
  CONVRED_ALLOW_CUDA_MISMATCH=1
                      build even when nvcc's CUDA major version differs from torch.version.cuda's
                      (torch.utils.cpp_extension refuses that by default). Only the kernels' .cu files
                      are compiled by nvcc and they include no torch header; the extension then loads
                      nvcc's libcudart next to torch's, which works when the driver supports both
                      (streams are driver handles shared by both runtimes). Prefer a matching pair:
                      torch 2.11 from PyPI is built with CUDA 13.0.
The headers come from ../include (this package is built from the repository's own headers).
"""
import os

from setuptools import setup
import torch.utils.cpp_extension as _cpp_ext
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

if os.environ.get("CONVRED_ALLOW_CUDA_MISMATCH") == "1":
    _strict_check = _cpp_ext._check_cuda_version

    def _lenient_check(compiler_name, compiler_version):
        try:
            _strict_check(compiler_name, compiler_version)
        except RuntimeError as e:
            print(f"convred setup.py: CONVRED_ALLOW_CUDA_MISMATCH=1: going on despite: {e}")

    _cpp_ext._check_cuda_version = _lenient_check

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.normpath(os.path.join(HERE, "..", "include"))
if not os.path.isfile(os.path.join(INCLUDE, "convred", "convred.cuh")):
    raise RuntimeError(f"convred headers not found at {INCLUDE}: build from a clone of the repository")

ARCHS = [a.strip() for a in os.environ.get("CONVRED_CUDA_ARCH", "90a;80").replace(",", ";").split(";") if a.strip()]
for a in ARCHS:
    if not a.rstrip("af").isdigit():
        raise RuntimeError(f"CONVRED_CUDA_ARCH: '{a}' is not an architecture such as 80, 90a")
GENCODE = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]

# one translation unit per (dtype, math): 6 instantiations each (ops argmin, argmax, min, max, sum, mean), so that
# ninja spreads them over the cores
CU = ["f32_ieee", "f32_tf32", "f32_tf32x3", "f32_bf16", "f32_fp16", "f64"] + [
    f"{t}_{m}" for t in ("f16", "bf16") for m in ("ieee", "bf16", "fp16")]
# binding.cpp (host compiler) includes convred's problem.cuh, which uses libcu++ (<cuda/std/...>): CUDA 13
# keeps the CCCL headers in include/cccl, which nvcc adds by itself and the host compiler does not
CCCL = [d for d in [os.path.join(CUDA_HOME or "", "include", "cccl")] if CUDA_HOME and os.path.isdir(d)]

SOURCES = ["csrc/binding.cpp"] + [f"csrc/{n}.cu" for n in CU]

NVCC = [
    "-O3",
    "-std=c++17",
    # torch's defaults switch off the half/bf16 operators; the .cu files include no torch header and
    # convred's headers use the CUDA ones as the library's own build does
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "-lineinfo",
] + GENCODE

setup(
    name="convred",
    version="0.1.0",
    description="Fused conv2d -> scale -> channel reduction for PyTorch (CUDA), built on the convred headers",
    packages=["convred"],
    ext_modules=[
        CUDAExtension(
            name="convred._C",
            sources=SOURCES,
            include_dirs=[INCLUDE, os.path.join(HERE, "csrc")] + CCCL,
            extra_compile_args={"cxx": ["-O2", "-g0", "-std=c++17"], "nvcc": NVCC},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    install_requires=["torch>=2.4"],
)
