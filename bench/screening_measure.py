#!/usr/bin/env python3
"""Certified screening, step 1 "measure first" (issue 28): candidate channels per pixel after a
low-precision pass with a rigorous error bound, for y = R over k of scale * (b[k] + conv2d(x, W)[n, k, p, q]),
R = min or max, scale = 2.

What it measures, for each problem and each screening precision (tf32, fp16, bf16):

  * yhat[n,k,p,q]: the screening output. x and W (fp32) are rounded to the precision exactly as the kernel's
    conversion does (tf32: the low 13 mantissa bits of the fp32 value rounded to nearest, ties to even, as
    sm_90's cvt.rn.tf32.f32; fp16 / bf16: PyTorch's casts, round to nearest even, fp16 overflow to inf and
    subnormals kept), the products of the rounded operands are summed in float64, then bias and scale.
    THE TENSOR CORES' ACCUMULATION (not IEEE: alignment and normalisation with truncation, Fasi, Higham,
    Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330, 2021) IS NOT EMULATED:
    yhat carries the operand-rounding error only. The bound below carries an accumulation term for it.
  * y: the exact result (float64 from the fp32 x, W, b), and y32: a strict-fp32 GEMM (TF32 off) of the same
    data, standing in for convred's math::ieee result (not its summation order).
  * per (pixel, channel) an error bound B >= |yhat_kernel - y| (and >= |yhat_kernel - y_ieee| with the
    default --target fp32), in several forms (L = GEMM_K = C/groups * R * S, s = |scale|,
    u = unit roundoff of the operand precision: 2^-11 tf32 and fp16, 2^-8 bf16; eta = half the subnormal
    spacing: 2^-137 tf32, 2^-25 fp16, 2^-134 bf16; S = an upper bound of sum_i |x_i||w_i| over the patch):
      operand rounding   (2u + u^2) S + eta (1+u) (sum|x| + sum|w|) + L eta^2
      accumulation       F * gamma_{L+1}(2^-23) * (|b_k| + sum |x~_i||w~_i|),  gamma_n(v) = n v / (1 - n v),
                         i.e. every one of the L+1 terms may carry a relative error of up to (L+1) * 2^-23
                         (fp32 accumulation with truncation; F = --acc-safety, default 1), where
                         sum |x~||w~| <= (1+u)^2 S + eta (1+u) (sum|x| + sum|w|) + L eta^2
      reference          gamma_{L+2}(2^-24) (|b_k| + S) with --target fp32 (any fp32 FMA order of the L
                         products, the bias add included: what math::ieee recomputes), plus
                         2 gamma_{L+2}(2^-53) (|b_k| + S) for the float64 arithmetic of this script
      epilogue           2^-24 (1 + 2^-23) |yhat|: the fp32 bias add of the kernel's epilogue
      B = s * (operand + accumulation + reference) + epilogue
    with S from one of the bounds:
      cs      Cauchy-Schwarz  ||x_patch||_2 * ||w_k||_2                      (per pixel and channel)
      holder  Hoelder         ||x_patch||_inf * ||w_k||_1
      abs     sum_i |x_i||w_i| exactly: a second |x| x |W| GEMM; the lower limit of every bound of the
              form c * u * S (not of every bound: see cs_err)
      tile    per tile of 128 consecutive output pixels (an image's p*Q+q order, as an implicit-GEMM M tile):
              max over the tile of ||x_patch||_2, times ||w_k||_2 (one norm per tile, not per pixel)
    and two more:
      cs_err  Cauchy-Schwarz on the exact rounding residuals (x~ w~ - x w = e_x w~ + x e_w):
              operand term ||x~_patch - x_patch||_2 ||w~_k||_2 + ||x_patch||_2 ||w~_k - w_k||_2 (exact,
              subnormals and overflow included; the kernel would need the residual's norm per pixel, which
              the 3xTF32 split already forms), accumulation term with ||x~_patch||_2 ||w~_k||_2
      oracle  B = |yhat - y| (max with |yhat - y32| under --target fp32): the error itself, no
              accumulation term -- the limit no computable bound reaches
  * the candidate set per pixel: for min, {k : yhat_k - B_k <= min_j (yhat_j + B_j)}; for max,
    {k : yhat_k + B_k >= max_j (yhat_j - B_j)} (a NaN or inf anywhere makes every channel a candidate).
    Per problem x precision x bound x op: mean, p50, p99, max candidates per pixel, the fraction of pixels
    with exactly one, the recompute's cost relative to the dense conv (mean / K: a second kernel over
    compacted candidates), and "warp32" (mean over pixels of the largest count among 32 consecutive pixels,
    / K: an epilogue recomputing in lockstep over 32 pixels).
  * checks (all must be 0): |yhat - y| > B, |yhat - y32| > B (--target fp32), and the float64 argmin/argmax
    (lowest index among ties, as torch.min) and the strict-fp32 one missing from the candidate set.

Problems (--problems, comma-separated names or groups seed, photos, suite):
  seed       x (64, 64, 256, 256) ~ N(0,1) as the benchmarks (bench/conv_reduce_bench.cu, pytorch_baseline.py
             and example 01 draw x from N(0,1)), W (128, 64, 3, 3), b (128) as torch.nn.Conv2d initialises
             them, no padding, scale 2 (the suite's "seed" layer is this problem)
  seed.rand  the same with x ~ U[0,1) (torch.rand: KernelBench's inputs for this model; all-positive x)
  photos     examples/01_conv_scale_min/real_photos.py's default input: 8 scikit-image photographs at
             256 x 256, its fixed 1x1 stem 3 -> 64 + ReLU, W (128, 64, 3, 3), b, torch.manual_seed(0) as it does
             (the same x, W, b as that script). Without scikit-image: synthetic natural-image-like inputs
             (dead leaves + 1/f texture) through the same stem, named synthphotos (the JSON says which)
  photos.rgb the same photographs as a first layer: C = 3 (real_photos.py --channels 3)
  suite      the 15 other layers of the 32-case shape suite (16 layers x batch 1 and a training batch; see
             SUITE below), each at --suite-images images (default: its training batch; per-pixel statistics
             do not depend on the batch, which only adds samples), x ~ N(0,1), W, b as torch.nn.Conv2d.

Runs on CUDA when available (float64 GEMMs on cuBLAS), else on the CPU. Images are processed in chunks
(--mem-gb bounds a chunk's working set). --small shrinks every problem (1-2 images, H and W <= 64 or 32) for
a CPU test run. --time-budget stops a problem early (after a whole chunk; the JSON records the images used)
when the run would overrun it.

Output: a JSON (--out) with every row, and a compact table on stdout.
Exit code: 0; 1 when a bound check failed (a violation or a missed argmin/argmax); 2 bad arguments.
"""

import argparse
import datetime
import json
import math
import os
import sys
import time
import zlib

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCALE = 2.0

# Operand precisions: unit roundoff u (round to nearest) and eta, half the spacing of the subnormals (the
# largest absolute rounding error of a value below the smallest normal number).
PRECISIONS = {
    "tf32": dict(u=2.0 ** -11, eta=2.0 ** -137),  # 10 stored mantissa bits, fp32's exponent range
    "fp16": dict(u=2.0 ** -11, eta=2.0 ** -25),   # 10 bits, subnormals from 2^-24, max 65504
    "bf16": dict(u=2.0 ** -8, eta=2.0 ** -134),   # 7 bits, fp32's exponent range
}
BOUNDS = ["cs", "holder", "abs", "tile", "cs_err", "oracle"]
OPS = ["min", "max"]
U_ACC = 2.0 ** -23   # fp32 accumulation with truncation (Fasi et al. 2021): relative error per add < 2^-23
U_FP32 = 2.0 ** -24  # IEEE fp32, round to nearest
U_FP64 = 2.0 ** -53
TILE = 128           # output pixels per tile for the "tile" bound
WARP = 32            # pixels recomputed in lockstep for the "warp32" cost

# The shape suite: (name, source, C, H, W, K, R, S, pad, stride, groups, training batch), from
# bench/pytorch_baseline.py (kept in step with kSuite in bench/conv_reduce_bench.cu; its top-level imports
# are the standard library's); its last layer, "seed", is the problem "seed" here and is not repeated.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_baseline import SUITE  # noqa: E402

# Cost model for the printed estimate (per device): float64 and fp32 GEMM rates (FLOP/s), the effective rate
# of PyTorch's elementwise passes (bytes/s), the bytes moved per (channel, pixel) element and per unfolded
# (patch element, pixel) element, and a fixed cost per chunk and per run. The H200: cuBLAS DGEMM reaches
# ~60 TFLOP/s of the 67 peak (taken as 40 here), SGEMM ~50 (taken as 35); HBM 4.8 TB/s, elementwise fp64
# passes with reductions taken as 2 TB/s. The CPU rate: fitted to --small on a 2-core host (4 GB/s).
COST = {
    "cuda": dict(f64=40e12, f32=35e12, bw=2.0e12, chunk_s=0.05, start_s=5.0),
    "cpu": dict(f64=25e9, f32=50e9, bw=4.0e9, chunk_s=0.02, start_s=0.5),
}
BYTES_PER_KM_PREC_BOUND = 8 * 3 * 34   # ~34 fp64 passes (two reads, one write) per (precision, bound), both ops
BYTES_PER_KM_PREC = 8 * 3 * 6          # yhat, its errors, the epilogue term
BYTES_PER_KM = 8 * 3 * 8               # y, y32, |W||x|, argmins
BYTES_PER_LM = 8 * 2 * 14              # unfold, casts, norms, residuals (per precision included)


# ---------------------------------------------------------------------------------------------------------
# rounding

def round_tf32(t):
    """fp32 -> tf32 value (as fp32): the low 13 mantissa bits rounded to nearest, ties to even (sm_90's
    cvt.rn.tf32.f32); overflow gives inf; NaN and inf unchanged; subnormals rounded on the same grid."""
    assert t.dtype == torch.float32
    bits = t.contiguous().view(torch.int32)
    r = (bits + (0x0FFF + ((bits >> 13) & 1))) & ~0x1FFF  # magnitude bits: no carry into the sign for finite t
    return torch.where(torch.isfinite(t), r.view(torch.float32), t)


def round_to(prec, t):
    """fp32 tensor -> the values of precision prec, as float64."""
    if prec == "tf32":
        return round_tf32(t).double()
    if prec == "fp16":
        return t.half().double()
    if prec == "bf16":
        return t.bfloat16().double()
    raise ValueError(prec)


def self_test_rounding():
    """A few exact cases and the fp16/tf32 agreement in fp16's normal range (both 10 bits, ties to even)."""
    one = 1.0
    cases = [(one + 2.0 ** -11, one), (one + 3 * 2.0 ** -11, one + 2 * 2.0 ** -10), (one + 2.0 ** -11 + 2.0 ** -20,
             one + 2.0 ** -10), (-(one + 3 * 2.0 ** -11), -(one + 2.0 ** -9)), (3.4028234663852886e38, float("inf"))]
    for v, want in cases:
        got = round_tf32(torch.tensor([v], dtype=torch.float32)).item()
        if got != want:
            sys.exit("screening_measure.py: tf32 rounding self-test failed: %r -> %r, want %r" % (v, got, want))
    g = torch.Generator().manual_seed(1)
    t = (torch.randn(1 << 16, generator=g) * torch.exp2(torch.randint(-12, 14, (1 << 16,), generator=g))).float()
    t = t[(t.abs() >= 2.0 ** -14) & (t.abs() < 65504)]
    if not torch.equal(round_tf32(t), t.half().float()):
        sys.exit("screening_measure.py: tf32 and fp16 rounding disagree in fp16's normal range")
    # fp16 range and subnormals, bf16 ties
    if torch.tensor([70000.0]).half().item() != float("inf") or torch.tensor([2.0 ** -25 * 3]).half().item() != 2.0 ** -23:
        sys.exit("screening_measure.py: fp16 cast self-test failed")
    if torch.tensor([1.0 + 2.0 ** -8]).bfloat16().item() != 1.0 or \
            torch.tensor([1.0 + 3 * 2.0 ** -8]).bfloat16().item() != 1.0 + 2.0 ** -6:
        sys.exit("screening_measure.py: bf16 cast self-test failed")


# ---------------------------------------------------------------------------------------------------------
# problems and inputs

def problem(name, kind, source, N, C, H, W, K, R, S, pad, stride, groups, seed, **extra):
    Ho = (H + 2 * pad - R) // stride + 1
    Wo = (W + 2 * pad - S) // stride + 1
    return dict(name=name, kind=kind, source=source, N=N, C=C, H=H, W=W, K=K, R=R, S=S, pad=pad, stride=stride,
                groups=groups, P=Ho, Q=Wo, L=C // groups * R * S, seed=seed, **extra)


def build_problems(args):
    small = args.small
    want = []
    for item in args.problems.split(","):
        item = item.strip()
        if not item:
            continue
        if item == "suite":
            want += ["suite:" + s[0] for s in SUITE if s[0] != "seed"]
        elif item == "photos":
            want += ["photos", "photos.rgb"]
        elif item == "seed":
            want += ["seed", "seed.rand"]
        elif item in ("seed.randn",):
            want += ["seed"]
        elif item in ("seed.rand", "photos.stem64", "photos.rgb") or item.startswith("suite:"):
            want += ["photos" if item == "photos.stem64" else item]
        elif any(s[0] == item for s in SUITE):
            want += ["suite:" + item]
        else:
            raise ValueError("unknown problem %r (groups: seed, photos, suite; names: seed.rand, "
                     "photos.rgb, or a suite layer: %s)" % (item, ", ".join(s[0] for s in SUITE[:-1])))
    probs = []
    seen = set()
    for w in want:
        if w in seen:
            continue
        seen.add(w)
        if w in ("seed", "seed.rand"):
            n = args.images if args.images else (1 if small else 64)
            hw = 64 if small else 256
            src = ("the seed: x ~ N(0,1) as the benchmarks" if w == "seed" else
                   "the seed with x ~ U[0,1) (torch.rand, as KernelBench's inputs)")
            probs.append(problem(w, "randn" if w == "seed" else "rand", src, n, 64, hw, hw, 128, 3, 3, 0, 1, 1,
                                 args.seed))
        elif w in ("photos", "photos.rgb"):
            n = args.photo_images if args.photo_images else (2 if small else 8)
            size = 64 if small else 256
            C = 64 if w == "photos" else 3
            src = ("real_photos.py's input: photographs -> 1x1 stem 3->64 + ReLU" if C == 64 else
                   "real_photos.py --channels 3: the normalised RGB photographs")
            probs.append(problem(w, "photos", src, n, C, size, size, 128, 3, 3, 0, 1, 1, 0, channels=C))
        else:
            lname = w.split(":", 1)[1]
            row = [s for s in SUITE if s[0] == lname][0]
            _, src, C, H, W, K, R, S, pad, st, g, tn = row
            n = args.suite_images if args.suite_images else (1 if small else tn)
            if small:
                H, W = min(H, 32), min(W, 32)
            probs.append(problem(lname, "randn", src, n, C, H, W, K, R, S, pad, st, g,
                                 args.seed ^ (zlib.crc32(lname.encode()) & 0xFFFF), suite=True, train_n=tn))
    return probs


def make_conv(p):
    """W, b as torch.nn.Conv2d initialises them (kaiming-uniform a = sqrt(5): U(+-1/sqrt(fan_in)), bias the same
    bound), from torch.manual_seed(p['seed']); for the photos, the RNG order of real_photos.py (stem first)."""
    torch.manual_seed(p["seed"])
    stem = None
    if p["kind"] == "photos" and p["channels"] == 64:
        stem = torch.nn.Conv2d(3, 64, 1)
    conv = torch.nn.Conv2d(p["C"], p["K"], (p["R"], p["S"]), stride=p["stride"], padding=p["pad"],
                           groups=p["groups"])
    w = conv.weight.detach().float().contiguous()
    b = conv.bias.detach().float().contiguous()
    return w, b, stem


def load_real_photos(n, size):
    """real_photos.py's build_batch (its photographs, resize and crop, ImageNet normalisation): (n, 3, size,
    size) float64 numpy and the names, or None when scikit-image is missing."""
    try:
        import numpy  # noqa: F401
        import skimage  # noqa: F401
    except ImportError:
        return None
    import importlib.util
    import numpy
    path = os.path.join(REPO, "examples", "01_conv_scale_min", "real_photos.py")
    spec = importlib.util.spec_from_file_location("convred_real_photos", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.np = numpy  # the script imports NumPy in its main()
    try:
        x, names = mod.build_batch(n, size)
    except SystemExit:
        return None
    return torch.from_numpy(numpy.ascontiguousarray(x)), names


def synth_photos(n, size, seed):
    """Natural-image-like RGB in [0, 1] (then ImageNet-normalised as real_photos.py): a dead-leaves image
    (occluding discs, radii with density ~ r^-3, colours around a random palette: flat regions and sharp edges)
    plus a 1/f texture (a natural image's ~1/f^2 power spectrum), a slight blur. Float64, (n, 3, size, size)."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float64), torch.arange(size, dtype=torch.float64),
                            indexing="ij")
    fy = torch.fft.fftfreq(size, dtype=torch.float64).view(-1, 1)
    fx = torch.fft.rfftfreq(size, dtype=torch.float64).view(1, -1)
    f = torch.sqrt(fx * fx + fy * fy).clamp_min(1.0 / size)
    out = []
    n_discs, rmin, rmax = 3000, 1.5, size / 3.0  # ~3x cover
    for _ in range(n):
        background = torch.rand(3, generator=g, dtype=torch.float64)
        palette = torch.rand(4, 3, generator=g, dtype=torch.float64)
        palette = 0.5 * palette + 0.5 * palette.mean(1, keepdim=True)  # muted colours
        v = torch.rand(n_discs, generator=g, dtype=torch.float64)
        r = 1.0 / torch.sqrt((1 - v) / rmin ** 2 + v / rmax ** 2)  # density ~ r^-3 on [rmin, rmax]
        cy, cx = (torch.rand(2, n_discs, generator=g, dtype=torch.float64) * size).unbind(0)
        col = (palette[torch.randint(0, 4, (n_discs,), generator=g)] +
               0.15 * torch.randn(n_discs, 3, generator=g, dtype=torch.float64)).clamp(0, 1)
        img = background.view(3, 1, 1).repeat(1, size, size)
        for d in range(n_discs):  # painted in order: later discs occlude earlier ones
            rd, yc, xc = r[d].item(), cy[d].item(), cx[d].item()
            y0, y1 = max(0, int(yc - rd)), min(size, int(yc + rd) + 2)
            x0, x1 = max(0, int(xc - rd)), min(size, int(xc + rd) + 2)
            if y0 >= y1 or x0 >= x1:
                continue
            m = (yy[y0:y1, x0:x1] - yc) ** 2 + (xx[y0:y1, x0:x1] - xc) ** 2 <= rd * rd
            img[:, y0:y1, x0:x1] = torch.where(m, col[d].view(3, 1, 1), img[:, y0:y1, x0:x1])
        noise = torch.randn(3, size, size, generator=g, dtype=torch.float64)
        tex = torch.fft.irfft2(torch.fft.rfft2(noise) / f, s=(size, size))
        tex = tex / tex.std() * 0.06
        img = img + 0.6 * tex + 0.4 * tex.mean(0, keepdim=True)  # partly luminance-correlated texture
        img = F.avg_pool2d(F.pad(img[None], (1, 1, 1, 1), mode="replicate"), 3, stride=1)[0]  # optics
        out.append(img.clamp(0, 1))
    x = torch.stack(out)
    mean = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float64).view(1, 3, 1, 1)
    return (x - mean) / std


class Inputs:
    """x in chunks of images on the device: N(0,1) / U[0,1) drawn per image from a generator seeded by (problem
    seed, image), so the data do not depend on the chunking; or the photographs, prepared once."""

    def __init__(self, p, stem, dev, log):
        self.p, self.dev = p, dev
        self.x_all = None
        if p["kind"] == "photos":
            got = load_real_photos(p["N"], p["H"])
            if got is None:
                rgb = synth_photos(p["N"], p["H"], 2026)
                p["name"] = "synth" + p["name"]
                p["source"] = ("SYNTHETIC natural-image-like inputs (dead leaves + 1/f texture; scikit-image not "
                               "available)") + (" -> 1x1 stem 3->64 + ReLU" if p["channels"] == 64 else ", C = 3")
                p["photos"] = []
                log("note: scikit-image unavailable: %s uses synthetic natural-image-like inputs" % p["name"])
            else:
                rgb, names = got
                p["photos"] = list(names)
            if p["channels"] == 64:
                with torch.no_grad():
                    x64 = F.relu(F.conv2d(rgb, stem.weight.double(), stem.bias.double()))
                self.x_all = x64.float()
            else:
                self.x_all = rgb.float()
            self.x_all = self.x_all.contiguous()

    def chunk(self, i0, i1):
        p = self.p
        if self.x_all is not None:
            return self.x_all[i0:i1].to(self.dev)
        xs = []
        for i in range(i0, i1):
            g = torch.Generator(device=self.dev).manual_seed((p["seed"] * 1000003 + i) & 0x7FFFFFFFFFFF)
            shape = (1, p["C"], p["H"], p["W"])
            if p["kind"] == "rand":
                xs.append(torch.rand(shape, generator=g, device=self.dev))
            else:
                xs.append(torch.randn(shape, generator=g, device=self.dev))
        return torch.cat(xs)


# ---------------------------------------------------------------------------------------------------------
# cost model

def estimate(p, n_images, dev_type, n_prec, n_bounds, chunks):
    c = COST[dev_type]
    M = n_images * p["P"] * p["Q"]
    K, L, g = p["K"], p["L"], p["groups"]
    gemm = 2.0 * K * L * M
    t_gemm = gemm * (2 + n_prec) / c["f64"] + gemm / c["f32"]
    km = K * M * (BYTES_PER_KM + n_prec * (BYTES_PER_KM_PREC + n_bounds * BYTES_PER_KM_PREC_BOUND))
    lm = g * L * M * BYTES_PER_LM * (1 + n_prec)
    return t_gemm + (km + lm) / c["bw"] + chunks * c["chunk_s"], gemm


def chunk_images(p, dev_type, mem_gb, n_prec):
    """Images per chunk so that the working set (unfolded patches in fp32 and fp64 copies, ~14 (channel, pixel)
    tensors in fp64) stays within mem_gb."""
    pix = p["P"] * p["Q"]
    per_image = pix * (p["groups"] * p["L"] * (4 + 8 * 4) + p["K"] * 8 * 14)
    return max(1, min(p["N"], int(mem_gb * 2 ** 30 // per_image)))


# ---------------------------------------------------------------------------------------------------------
# the measurement

def gamma(n, v):
    return n * v / (1.0 - n * v)


class Accum:
    """Statistics of one (precision, bound): per op a histogram of candidates per pixel, missed argmin/argmax,
    the warp32 sum; the bound checks. Device tensors, read once at the end."""

    def __init__(self, K, dev):
        z = lambda: torch.zeros((), dtype=torch.float64, device=dev)  # noqa: E731
        self.hist = {op: torch.zeros(K + 1, dtype=torch.int64, device=dev) for op in OPS}
        self.missed = {op: torch.zeros((), dtype=torch.int64, device=dev) for op in OPS}
        self.missed32 = {op: torch.zeros((), dtype=torch.int64, device=dev) for op in OPS}
        self.warp = {op: z() for op in OPS}
        self.viol = torch.zeros((), dtype=torch.int64, device=dev)
        self.viol32 = torch.zeros((), dtype=torch.int64, device=dev)
        self.ratio = z()
        self.ratio32 = z()
        self.acc_share = z()
        self.values = 0


def unfold_groups(x, p):
    """(Nc, C, H, W) fp32 -> (groups, L, Nc*P*Q) fp32: the implicit-GEMM B operand, pixels in (n, p, q) order."""
    Nc = x.shape[0]
    g, L = p["groups"], p["L"]
    cols = F.unfold(x, (p["R"], p["S"]), padding=p["pad"], stride=p["stride"])  # (Nc, C*R*S, P*Q)
    cols = cols.view(Nc, g, L, -1).permute(1, 2, 0, 3).reshape(g, L, -1)
    return cols.contiguous()


def group_max(v, Nc, pix, size):
    """v (..., Nc*pix) -> the max over runs of `size` consecutive pixels of one image, broadcast back."""
    lead = v.shape[:-1]
    t = v.reshape(*lead, Nc, pix)
    padn = (-pix) % size
    if padn:
        t = F.pad(t, (0, padn), value=0)
    m = t.reshape(*lead, Nc, -1, size).amax(-1, keepdim=True)
    m = m.expand(*lead, Nc, m.shape[-2], size).reshape(*lead, Nc, -1)[..., :pix]
    return m.reshape(*lead, Nc * pix)


def measure_chunk(x, p, wts, accs, args, dev):
    g, L, K = p["groups"], p["L"], p["K"]
    Kg = K // g
    Nc = x.shape[0]
    pix = p["P"] * p["Q"]
    s = abs(SCALE)
    W32, W64, b64, babs = wts["W32"], wts["W64"], wts["b64"], wts["babs"]

    cols32 = unfold_groups(x, p)                      # (g, L, M) fp32
    M = cols32.shape[-1]
    cols = cols32.double()
    y = torch.baddbmm(b64.view(g, Kg, 1).expand(g, Kg, M), W64, cols).mul_(SCALE)  # exact (float64)
    y32 = torch.baddbmm(wts["b32"].view(g, Kg, 1).expand(g, Kg, M), W32, cols32).mul_(SCALE)  # strict fp32
    yv = y.view(K, M)
    y32v = y32.view(K, M)
    idx = {"min": yv.argmin(0, keepdim=True), "max": yv.argmax(0, keepdim=True)}
    idx32 = {"min": y32v.argmin(0, keepdim=True), "max": y32v.argmax(0, keepdim=True)}

    cabs = cols.abs()
    xn2 = cols.square().sum(1, keepdim=True).sqrt_()  # (g, 1, M)  ||x_patch||_2
    xninf = cabs.amax(1, keepdim=True)                 # ||x_patch||_inf
    x1 = cabs.sum(1, keepdim=True)                     # sum |x|
    need_abs = "abs" in args.bound_list
    Sabs = torch.bmm(W64.abs(), cabs) if need_abs else None  # (g, Kg, M) sum |x||w|
    del cabs
    xn2_tile = group_max(xn2, Nc, pix, TILE) if "tile" in args.bound_list else None
    wn2, wn1 = wts["wn2"], wts["wn1"]                  # (g, Kg, 1)
    sqrtL = math.sqrt(L)
    cref_fp32 = gamma(L + 2, U_FP32) if args.target == "fp32" else 0.0
    cref = cref_fp32 + 2 * gamma(L + 2, U_FP64)
    cacc = args.acc_safety * gamma(L + 1, U_ACC)
    c_epi = U_FP32 * (1 + 2 * U_FP32)

    for prec in args.prec_list:
        u, eta = PRECISIONS[prec]["u"], PRECISIONS[prec]["eta"]
        Wr = wts["Wr"][prec]
        xr = round_to(prec, cols32)
        yh = torch.baddbmm(b64.view(g, Kg, 1).expand(g, Kg, M), Wr, xr).mul_(SCALE)
        if "cs_err" in args.bound_list:
            exn2 = (xr - cols).square_().sum(1, keepdim=True).sqrt_()
            xrn2 = xr.square().sum(1, keepdim=True).sqrt_()
        del xr
        err = (yh - y).abs_()
        err32 = (yh - y32.double()).abs_()
        epi = yh.abs().mul_(c_epi)
        for bname in args.bound_list:
            a = accs[(prec, bname)]
            if bname == "oracle":
                B = torch.maximum(err, err32) if args.target == "fp32" else err.clone()
                acc = None
            else:
                if bname == "cs_err":
                    op_t = exn2 * wts["wrn2"][prec] + xn2 * wts["ewn2"][prec]
                    sig = xrn2 * wts["wrn2"][prec]
                    S = xn2 * wn2
                else:
                    if bname == "cs":
                        S, X1 = xn2 * wn2, sqrtL * xn2
                    elif bname == "holder":
                        S, X1 = xninf * wn1, L * xninf
                    elif bname == "abs":
                        S, X1 = Sabs, x1
                    elif bname == "tile":
                        S, X1 = xn2_tile * wn2, sqrtL * xn2_tile
                    else:
                        raise ValueError(bname)
                    sub = eta * (1 + u) * (X1 + wn1) + L * eta * eta  # (g, Kg, M) by broadcasting
                    op_t = S * (2 * u + u * u) + sub
                    sig = S * (1 + u) ** 2 + sub
                acc = (sig + babs).mul_(cacc * s)
                B = (S + babs).mul_(cref * s).add_(op_t, alpha=s).add_(acc).add_(epi)
                del op_t, sig, S
            Bv = B.view(K, M)
            a.viol += (err > B).sum()
            a.ratio = torch.maximum(a.ratio, (err / B.clamp_min(1e-300)).max())
            if args.target == "fp32":
                a.viol32 += (err32 > B).sum()
                a.ratio32 = torch.maximum(a.ratio32, (err32 / B.clamp_min(1e-300)).max())
            if acc is not None:
                a.acc_share += (acc / B).sum()
                del acc
            a.values += K * M
            yhv = yh.view(K, M)
            lo = yhv - Bv
            hi = yhv + Bv
            del B, Bv
            for op in OPS:
                if op == "min":
                    cand = ~(lo > hi.amin(0, keepdim=True))   # NaN anywhere: every channel a candidate
                else:
                    cand = ~(hi < lo.amax(0, keepdim=True))
                cnt = cand.sum(0)                             # (M,) candidates per pixel
                a.hist[op] += torch.bincount(cnt, minlength=K + 1)
                a.missed[op] += (~cand.gather(0, idx[op])).sum()
                a.missed32[op] += (~cand.gather(0, idx32[op])).sum()
                a.warp[op] += group_max(cnt.double(), Nc, pix, WARP).sum()
                del cand, cnt
            del lo, hi
        del yh, err, err32, epi
    return M


def hist_stats(h):
    """mean, p50, p99, max and fraction of ones from a histogram of counts."""
    total = sum(h)
    if total == 0:
        return dict(mean=float("nan"), p50=None, p99=None, max=None, frac1=float("nan"))
    mean = sum(c * n for c, n in enumerate(h)) / total
    cum, p50, p99 = 0, None, None
    for c, n in enumerate(h):
        cum += n
        if p50 is None and cum >= 0.5 * total:
            p50 = c
        if p99 is None and cum >= 0.99 * total:
            p99 = c
    mx = max(c for c, n in enumerate(h) if n)
    return dict(mean=mean, p50=p50, p99=p99, max=mx, frac1=h[1] / total if len(h) > 1 else 0.0)


def run_problem(p, args, dev, log, deadline_share):
    t0 = time.time()
    w, b, stem = make_conv(p)
    inputs = Inputs(p, stem, dev, log)
    g, K = p["groups"], p["K"]
    Kg = K // g
    W32 = w.view(g, Kg, -1).to(dev)
    W64 = W32.double()
    wts = dict(W32=W32, W64=W64, b32=b.to(dev), b64=b.double().to(dev),
               babs=b.double().abs().view(g, Kg, 1).to(dev),
               wn2=W64.square().sum(2, keepdim=True).sqrt(), wn1=W64.abs().sum(2, keepdim=True),
               Wr={}, wrn2={}, ewn2={})
    for prec in args.prec_list:
        Wr = round_to(prec, W32)
        wts["Wr"][prec] = Wr
        wts["wrn2"][prec] = Wr.square().sum(2, keepdim=True).sqrt()
        wts["ewn2"][prec] = (Wr - W64).square().sum(2, keepdim=True).sqrt()
    accs = {(pr, bn): Accum(K, dev) for pr in args.prec_list for bn in args.bound_list}
    per_chunk = chunk_images(p, dev.type, args.mem_gb, len(args.prec_list))
    n_chunks = -(-p["N"] // per_chunk)
    per_chunk = -(-p["N"] // n_chunks)  # even chunks
    done = 0
    pixels = 0
    stopped = False
    with torch.no_grad():
        while done < p["N"]:
            i1 = min(p["N"], done + per_chunk)
            x = inputs.chunk(done, i1)
            pixels += measure_chunk(x, p, wts, accs, args, dev)
            del x
            done = i1
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if done < p["N"] and time.time() - t0 > deadline_share:
                stopped = True
                log("note: %s stopped after %d of %d images (time budget)" % (p["name"], done, p["N"]))
                break
    if dev.type == "cuda":
        torch.cuda.synchronize()
    rows = []
    for (prec, bname), a in accs.items():
        for op in OPS:
            h = a.hist[op].tolist()
            st = hist_stats(h)
            rows.append(dict(
                problem=p["name"], precision=prec, bound=bname, op=op, u=PRECISIONS[prec]["u"],
                pixels=pixels, K=K, L=p["L"],
                mean=st["mean"], p50=st["p50"], p99=st["p99"], max=st["max"], frac1=st["frac1"],
                recompute_frac=st["mean"] / K, warp32_frac=a.warp[op].item() / (pixels * K),
                missed_argext_exact=int(a.missed[op].item()), missed_argext_fp32=int(a.missed32[op].item()),
                violations_exact=int(a.viol.item()),
                violations_fp32=int(a.viol32.item()) if args.target == "fp32" else None,
                err_over_bound_max=a.ratio.item(),
                err32_over_bound_max=a.ratio32.item() if args.target == "fp32" else None,
                acc_share_mean=(a.acc_share.item() / a.values) if bname != "oracle" else 0.0,
                values=a.values,
                hist={str(c): n for c, n in enumerate(h) if n}))
    info = {k: v for k, v in p.items()}
    info.update(images_used=done, stopped_by_budget=stopped, pixels=pixels, images_per_chunk=per_chunk,
                seconds=time.time() - t0)
    return info, rows


# ---------------------------------------------------------------------------------------------------------
# output

def fmt_stat(r):
    if r is None:
        return "-"
    return "%.3g/%d/%d" % (r["mean"], r["p99"], r["max"])


def print_table(rows, bounds, precs, problems, out):
    by = {(r["problem"], r["precision"], r["bound"], r["op"]): r for r in rows}
    w0 = max([len(p["name"]) for p in problems] + [7])
    head = "%-*s %-4s " % (w0, "problem", "prec") + " ".join("%-15s" % b for b in bounds) + \
        "  1cand%(cs)  recomp%(cs)  warp32%(cs)"
    out("min over channels: candidates per pixel, mean/p99/max, under each bound")
    out(head)
    out("-" * len(head))
    for p in problems:
        for prec in precs:
            cs = by.get((p["name"], prec, "cs", "min"))
            line = "%-*s %-4s " % (w0, p["name"], prec) + " ".join(
                "%-15s" % fmt_stat(by.get((p["name"], prec, b, "min"))) for b in bounds)
            if cs:
                line += "  %9.1f  %11.2f  %11.2f" % (100 * cs["frac1"], 100 * cs["recompute_frac"],
                                                     100 * cs["warp32_frac"])
            out(line)
    out("")
    out("max over channels: mean candidates per pixel under each bound")
    out("%-*s %-4s " % (w0, "problem", "prec") + " ".join("%-8s" % b for b in bounds))
    for p in problems:
        for prec in precs:
            out("%-*s %-4s " % (w0, p["name"], prec) + " ".join(
                "%-8s" % ("%.3g" % by[(p["name"], prec, b, "max")]["mean"]
                          if (p["name"], prec, b, "max") in by else "-") for b in bounds))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="seed,photos,suite",
                    help="comma-separated: seed (= seed,seed.rand), photos (= photos,photos.rgb), suite, or "
                         "single names (seed.rand, photos.rgb, a suite layer) (default: all)")
    ap.add_argument("--images", type=int, default=0, help="images of the seed problems (default 64; 1 with --small)")
    ap.add_argument("--photo-images", type=int, default=0, help="photographs (default 8; 2 with --small)")
    ap.add_argument("--suite-images", type=int, default=0,
                    help="images per suite layer (default: the layer's training batch; 1 with --small)")
    ap.add_argument("--precisions", default="tf32,fp16,bf16")
    ap.add_argument("--bounds", default=",".join(BOUNDS))
    ap.add_argument("--target", choices=["fp32", "exact"], default="fp32",
                    help="fp32 (default): the bound also covers any fp32 FMA recompute (math::ieee); exact: "
                         "float64 only")
    ap.add_argument("--acc-safety", type=float, default=1.0,
                    help="factor on the tensor-core accumulation term (default 1)")
    ap.add_argument("--small", action="store_true", help="shrink every problem for a CPU test run")
    ap.add_argument("--seed", type=int, default=2026, help="data seed (default 2026)")
    ap.add_argument("--mem-gb", type=float, default=0.0,
                    help="working set per chunk (default: 24 on CUDA, capped at half the free memory; 1.5 on CPU)")
    ap.add_argument("--time-budget", type=float, default=330.0,
                    help="seconds for the whole run: a problem stops after the chunk that overruns its share "
                         "(default 330)")
    ap.add_argument("--device", default="", help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--estimate-only", action="store_true", help="print the problems and the estimate, then exit")
    ap.add_argument("--out", default=os.path.join("bench", "results", "screening_measure.json"))
    args = ap.parse_args()

    args.prec_list = [s.strip() for s in args.precisions.split(",") if s.strip()]
    args.bound_list = [s.strip() for s in args.bounds.split(",") if s.strip()]
    for pr in args.prec_list:
        if pr not in PRECISIONS:
            ap.error("unknown precision %r (tf32, fp16, bf16)" % pr)
    for bn in args.bound_list:
        if bn not in BOUNDS:
            ap.error("unknown bound %r (%s)" % (bn, ", ".join(BOUNDS)))

    dev = torch.device(args.device if args.device else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        if not args.estimate_only:
            ap.error("--device cuda: no CUDA device (--estimate-only --device cuda prints the H200 estimate)")
        args.mem_gb = args.mem_gb or 24.0
    elif dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # y32: strict fp32
        torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if not args.mem_gb:
        if dev.type == "cuda":
            free, _total = torch.cuda.mem_get_info(dev)
            args.mem_gb = min(24.0, 0.5 * free / 2 ** 30)
        else:
            args.mem_gb = 1.5

    t_start = time.time()
    lines = []

    def log(s=""):
        print(s, flush=True)
        lines.append(s)

    self_test_rounding()
    if dev.type == "cuda" and torch.cuda.is_available():  # the device's casts give the same values as the host's
        t = torch.randn(1 << 18, generator=torch.Generator().manual_seed(2)) * 2.0 ** 14
        t = torch.cat([t, t * 2.0 ** -30, t * 2.0 ** -110]).float()
        for prec in args.prec_list:
            if not torch.equal(round_to(prec, t.to(dev)).cpu(), round_to(prec, t)):
                sys.exit("screening_measure.py: %s rounding differs between %s and the host" % (prec, dev))
    try:
        problems = build_problems(args)
    except ValueError as e:
        ap.error(str(e))
    if dev.type == "cuda":
        devname = torch.cuda.get_device_name(dev) if torch.cuda.is_available() else "cuda (not present: estimate only)"
    else:
        devname = "cpu (%d threads)" % torch.get_num_threads()
    log("screening_measure.py: torch %s on %s; target %s, acc-safety %g, precisions %s, bounds %s" % (
        torch.__version__, devname, args.target, args.acc_safety, ",".join(args.prec_list),
        ",".join(args.bound_list)))
    log("NOTE: yhat = rounded operands summed in float64; the tensor cores' own accumulation is not emulated "
        "(the bound carries a term for it)")

    # ---- the estimate ----
    est = []
    tot_est, tot_gflop = COST[dev.type]["start_s"], 0.0
    log("")
    log("%-32s %5s %5s %5s %5s %6s %9s %6s %8s  %s" % ("problem", "N", "C", "HxW", "K", "L", "pixels", "chunk",
                                                      "est s", "input"))
    for p in problems:
        pc = chunk_images(p, dev.type, args.mem_gb, len(args.prec_list))
        nch = -(-p["N"] // pc)
        t, gemm = estimate(p, p["N"], dev.type, len(args.prec_list), len(args.bound_list), nch)
        est.append(t)
        tot_est += t
        tot_gflop += gemm * (3 + len(args.prec_list)) / 1e9  # float64: exact, |W||x|, one per precision; fp32: y32
        log("%-32s %5d %5d %5s %5d %6d %9d %6d %8.2f  %s" % (p["name"], p["N"], p["C"], "%dx%d" % (p["H"], p["W"]),
                                                          p["K"], p["L"], p["N"] * p["P"] * p["Q"], pc, t,
                                                          p["source"]))
    log("estimate: %.0f GFLOP of GEMMs (float64: exact, |W||x| and %d screenings; fp32: 1), %.1f s in all on %s (model: %s)" % (
        tot_gflop, len(args.prec_list), tot_est, dev.type, COST[dev.type]))
    if args.estimate_only:
        return 0

    # ---- run ----
    infos, rows = [], []
    remaining = sum(est)
    for i, p in enumerate(problems):
        left = args.time_budget - (time.time() - t_start)
        share = max(1.0, left * est[i] / max(remaining, 1e-9))
        info, r = run_problem(p, args, dev, log, share)
        remaining -= est[i]
        infos.append(info)
        rows += r
        log("done %-32s %3d images, %9d pixels, %7.2f s (estimate %.2f)" % (
            info["name"], info["images_used"], info["pixels"], info["seconds"], est[i]))
    wall = time.time() - t_start

    # ---- checks ----
    bad = []
    for r in rows:
        fail = r["violations_exact"] or r["missed_argext_exact"]
        if args.target == "fp32":  # the bound must also cover the strict-fp32 result and its argmin/argmax
            fail = fail or r["violations_fp32"] or r["missed_argext_fp32"]
        if fail:
            bad.append(r)
    log("")
    print_table(rows, args.bound_list, args.prec_list, infos, log)
    log("")
    nvals = sum(r["values"] for r in rows if r["op"] == "min")
    if bad:
        log("BOUND CHECK FAILED in %d rows:" % len(bad))
        for r in bad:
            log("  %s %s %s %s: |yhat-y|>B %d, |yhat-y32|>B %s, missed arg%s float64 %d, fp32 %d" % (
                r["problem"], r["precision"], r["bound"], r["op"], r["violations_exact"], r["violations_fp32"],
                r["op"], r["missed_argext_exact"], r["missed_argext_fp32"]))
    else:
        log("bound check: 0 violations of |yhat - y| <= B%s over %d (pixel, channel, precision, bound) values; "
            "the float64%s argmin and argmax always among the candidates" % (
                " and |yhat - y32| <= B" if args.target == "fp32" else "", nvals,
                " and strict-fp32" if args.target == "fp32" else ""))
    worst = max((r for r in rows if r["bound"] != "oracle"), key=lambda r: r["err_over_bound_max"], default=None)
    if worst:
        log("largest |yhat - y| / B: %.3g (%s, %s, %s)" % (worst["err_over_bound_max"], worst["problem"],
                                                           worst["precision"], worst["bound"]))
    log("wall %.1f s (estimate %.1f s)" % (wall, tot_est))

    meta = dict(script="bench/screening_measure.py", argv=sys.argv[1:], date=datetime.datetime.now().isoformat(),
                torch=torch.__version__, device=devname, target=args.target, acc_safety=args.acc_safety,
                scale=SCALE, precisions={k: PRECISIONS[k] for k in args.prec_list}, bounds=args.bound_list,
                tile=TILE, warp=WARP, u_acc=U_ACC, small=args.small, seed=args.seed, wall_s=wall,
                estimate_s=tot_est, cost_model=COST[dev.type],
                note=("yhat: operands rounded exactly, products summed in float64; tensor-core accumulation not "
                      "emulated (bounded by the accumulation term). y: float64; y32: strict fp32 GEMM."),
                check_failed_rows=len(bad))
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, problems=infos, rows=rows, log=lines), f, indent=1)
    print("wrote %s (%d rows)" % (args.out, len(rows)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
