#!/usr/bin/env python3
"""PyTorch baselines for the convred benchmark (issue 3), and the combined table and bar chart.

Times, on the same cases as bench/conv_reduce_bench.cu,

    y = torch.min(F.conv2d(x, W, b, stride, padding) * 2.0, dim=1, keepdim=True)[0]     (x fp32 NCHW)

as PyTorch runs it:
  - "torch eager tf32"     eager, torch.backends.cudnn.allow_tf32 = True (PyTorch's default for convolutions)
  - "torch eager fp32"     eager, allow_tf32 = False (strict fp32: cuDNN FMA kernels)
  - "torch eager bf16"     eager under torch.autocast("cuda", dtype=torch.bfloat16) (the cast of x is timed)
  - "torch.compile tf32"   torch.compile(default mode, dynamic=False), allow_tf32 = True; compile time untimed
  - "torch.compile bf16 autocast" / "fp16 autocast": torch.compile of the model under torch.autocast
  - "torch.compile bf16 model+x" / "fp16 model+x": torch.compile with x, W and b already in bf16 / fp16
    (the conversion untimed): the fastest 16-bit peers
and checks each against a float64 reference on sampled output pixels (the corners, edge midpoints and
centre of up to 4 images, the rest random), as the C++ benchmark does.

The shape suite (--cases suite, suite.n1, suite.train, or one suite case; --list-cases names them): 16
convolutions of real networks (ResNet-50, VGG-16, U-Net, MobileNetV2 incl. a depthwise one, ConvNeXt-T's
7x7 depthwise, the seed), each at batch 1 and at a training batch, the same as conv_reduce_bench's suite.
Suite cases time five rows only: "torch eager tf32", "torch eager fp32", "torch eager bf16 autocast",
"torch.compile tf32", "torch.compile bf16 autocast" (eager in each precision the summary compares).
torch.compile (dynamic=False) recompiles the one compiled function per variant for every new shape; the
recompile limits of torch._dynamo are raised so that no shape falls back to eager, and each row's first
call (the compile) is recorded ("compile_s"; meta "compile_s_total").

Data as the C++ benchmark: x ~ N(0,1) (torch.randn), W and b as torch.nn.Conv2d initialises them
(U(+-1/sqrt(fan_in))). Timing: CUDA events around each run, the L2 flushed before every timed run
(zeroing a buffer of max(256 MiB, 4 x L2), outside the events, as triton.testing.do_bench) and the GPU
held ~0.5 ms (torch.cuda._sleep) so that the run is enqueued before its start event is reached (GPU time
without host launch gaps, as the C++ benchmark), warm-up runs first, median (and min) of --iters runs. torch.backends.cudnn.benchmark stays at PyTorch's default (False)
unless --cudnn-benchmark is given.

With --convred-json (the JSON of build-gpu/bench/conv_reduce_bench) the rows are merged into one table
(markdown on stdout), one JSON (--json) and one PNG bar chart of median ms per variant per case, log scale
(--png). --replot COMBINED.json redraws the table and chart from an earlier combined JSON without a GPU or
PyTorch (matplotlib only). With suite cases the chart is compact (one line per case: speed-up of each
convred planner row over torch.compile of the same precision, and median ms per row), and the combined
JSON gets a "summary" (per precision: geometric-mean speed-up over torch.compile, layers where convred is
slower than torch.compile or than PyTorch eager), printed as markdown too.

Exit code: 0 success; 1 a variant failed (printed) or a file could not be written; 2 no CUDA device.
"""

import argparse
import datetime
import json
import math
import statistics
import sys
import time
import traceback

CASES = {
    "seed": dict(N=64, C=64, H=256, W=256, K=128, R=3, S=3, pad=0, stride=1),
    "resnet3x3": dict(N=32, C=256, H=56, W=56, K=256, R=3, S=3, pad=1, stride=1),
    "stem7x7": dict(N=64, C=3, H=224, W=224, K=64, R=7, S=7, pad=3, stride=2),
    "proj1x1": dict(N=64, C=512, H=28, W=28, K=128, R=1, S=1, pad=0, stride=1),
}
CASE_ORDER = ["seed", "resnet3x3", "stem7x7", "proj1x1"]

# The shape suite: (name, source, C, H, W, K, R, S, pad, stride, groups, training batch); cases name.n<train>
# and name.n1. Keep in step with kSuite in bench/conv_reduce_bench.cu (same names, same shapes).
SUITE = [
    ("resnet50.conv1", "ResNet-50 stem conv1, 7x7 stride 2, 3->64 at 224", 3, 224, 224, 64, 7, 7, 3, 2, 1, 32),
    ("resnet50.layer1.0.conv2", "ResNet-50 layer1 3x3, 64->64 at 56", 64, 56, 56, 64, 3, 3, 1, 1, 1, 32),
    ("resnet50.layer2.1.conv2", "ResNet-50 layer2 3x3, 128->128 at 28", 128, 28, 28, 128, 3, 3, 1, 1, 1, 32),
    ("resnet50.layer2.0.conv2", "ResNet-50 layer2.0 3x3 stride 2, 128->128 at 56 (-> 28)",
     128, 56, 56, 128, 3, 3, 1, 2, 1, 32),
    ("resnet50.layer3.1.conv2", "ResNet-50 layer3 3x3, 256->256 at 14", 256, 14, 14, 256, 3, 3, 1, 1, 1, 32),
    ("resnet50.layer4.1.conv2", "ResNet-50 layer4 3x3, 512->512 at 7", 512, 7, 7, 512, 3, 3, 1, 1, 1, 32),
    ("resnet50.layer1.0.downsample", "ResNet-50 layer1.0 projection 1x1, 64->256 at 56",
     64, 56, 56, 256, 1, 1, 0, 1, 1, 32),
    ("resnet50.layer3.0.downsample", "ResNet-50 layer3.0 projection 1x1 stride 2, 512->1024 at 28",
     512, 28, 28, 1024, 1, 1, 0, 2, 1, 32),
    ("vgg16.conv1_2", "VGG-16 conv1_2 3x3, 64->64 at 224", 64, 224, 224, 64, 3, 3, 1, 1, 1, 32),
    ("vgg16.conv3_2", "VGG-16 conv3_2 3x3, 256->256 at 56", 256, 56, 56, 256, 3, 3, 1, 1, 1, 32),
    ("unet.enc1", "U-Net encoder 1, second 3x3, 64->64 at 256", 64, 256, 256, 64, 3, 3, 1, 1, 1, 16),
    ("unet.bottleneck", "U-Net bottleneck 3x3, 512->1024 at 32", 512, 32, 32, 1024, 3, 3, 1, 1, 1, 32),
    ("mobilenetv2.features.2.expand", "MobileNetV2 block 2 pointwise expand 1x1, 24->144 at 56",
     24, 56, 56, 144, 1, 1, 0, 1, 1, 32),
    ("mobilenetv2.features.2.dw", "MobileNetV2 block 2 depthwise 3x3, 144 channels at 56 (groups 144)",
     144, 56, 56, 144, 3, 3, 1, 1, 144, 32),
    ("convnext_t.stages.0.dwconv", "ConvNeXt-T stage 1 depthwise 7x7, 96 channels at 56 (groups 96)",
     96, 56, 56, 96, 7, 7, 3, 1, 96, 32),
    ("seed", "the seed model: 3x3, 64->128 at 256, no padding", 64, 256, 256, 128, 3, 3, 0, 1, 1, 64),
]
SUITE_ORDER = []
for _name, _src, _C, _H, _W, _K, _R, _S, _pad, _st, _g, _tn in SUITE:
    for _n in (_tn, 1):
        _case = "%s.n%d" % (_name, _n)
        CASES[_case] = dict(N=_n, C=_C, H=_H, W=_W, K=_K, R=_R, S=_S, pad=_pad, stride=_st, groups=_g,
                            suite=True, layer=_name, source=_src)
        SUITE_ORDER.append(_case)
ALL_ORDER = CASE_ORDER + SUITE_ORDER
# The rows a suite case times (the legacy cases time every variant).
SUITE_VARIANTS = ("torch eager tf32", "torch eager fp32", "torch eager bf16 autocast", "torch.compile tf32",
                  "torch.compile bf16 autocast")
# The PyTorch op of the convred package (--convred-op): convred.nn.Conv2dReduce(reduce="min") as a PyTorch
# user runs it (the filter packed once by the module, untimed; each call plans from the op's cache), one row
# per precision, beside the C++ planner's rows of the same precision.
CONVRED_OP_ROWS = (("convred op tf32", "tf32", "convred plan tf32"), ("convred op bf16", "bf16", "convred plan bf16"),
                   ("convred op fp32-accurate", "accurate", "convred plan fp32-accurate"))


def select_cases(item):
    """Case names selected by one --cases item: a case, suite, suite.n1 or suite.train ([] if unknown)."""
    if item == "suite":
        return list(SUITE_ORDER)
    if item in ("suite.n1", "suite.train"):
        return [n for n in SUITE_ORDER if (CASES[n]["N"] == 1) == (item == "suite.n1")]
    return [item] if item in CASES else []


# Ceilings measured on the H200 (docs/performance.md), TFLOP/s.
CEIL_FFMA = 50.5
CEIL_TF32 = 394.0
CEIL_BF16 = 756.0
SCALE = 2.0
SPIN_CYCLES = 1_000_000  # ~0.5 ms at the H200's ~2 GHz: torch.cuda._sleep before each timed run

# Tolerances of docs/tolerances.md for relative norm error vs float64 (flagged, not fatal, for PyTorch).
TOL = {"tf32": 1e-3, "fp32": 1e-5, "bf16": 1e-2}


def out_size(n, pad, k, stride):
    return (n + 2 * pad - k) // stride + 1


def case_dims(c):
    P = out_size(c["H"], c["pad"], c["R"], c["stride"])
    Q = out_size(c["W"], c["pad"], c["S"], c["stride"])
    return P, Q


def case_flops(c):
    P, Q = case_dims(c)
    return 2.0 * c["N"] * P * Q * c["K"] * (c["C"] // c.get("groups", 1)) * c["R"] * c["S"]


def shape_string(c):
    P, Q = case_dims(c)
    s = "x(%d,%d,%d,%d) -> K=%d %dx%d" % (c["N"], c["C"], c["H"], c["W"], c["K"], c["R"], c["S"])
    if c["stride"] != 1:
        s += " stride %d" % c["stride"]
    if c["pad"] != 0:
        s += " pad %d" % c["pad"]
    if c.get("groups", 1) != 1:
        s += " groups %d" % c["groups"]
    return s + " -> y(%d,1,%d,%d)" % (c["N"], P, Q)


# --------------------------------------------------------------------------------------------------------
# Measurement (needs torch and a GPU)
# --------------------------------------------------------------------------------------------------------


def set_tf32(torch, enabled):
    """Sets TF32 for cuDNN convolutions (legacy flag; the fp32_precision API if the legacy one refuses)."""
    try:
        torch.backends.cudnn.allow_tf32 = enabled
    except Exception:  # noqa: BLE001 - newer PyTorch may only take the new API
        torch.backends.cudnn.conv.fp32_precision = "tf32" if enabled else "ieee"


def get_tf32(torch):
    try:
        return bool(torch.backends.cudnn.allow_tf32)
    except Exception:  # noqa: BLE001
        return torch.backends.cudnn.conv.fp32_precision == "tf32"


def time_cuda(torch, fn, iters, warmup, flush):
    """Median and min ms of fn over iters runs, each after an L2 flush, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    sleep = getattr(torch.cuda, "_sleep", None)
    for i in range(iters):
        flush.zero_()
        if sleep is not None:
            sleep(SPIN_CYCLES)  # hold the GPU so that fn is fully enqueued before the start event is reached
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return statistics.median(t), t[0]


def sample_pixels(c, count, gen):
    """(n, p, q) samples: corners, edge midpoints and centre of up to 4 images (first, last, 2 random), then random."""
    N = c["N"]
    P, Q = case_dims(c)
    imgs = [0] + ([N - 1] if N > 1 else [])
    tries = 0
    while len(imgs) < min(N, 4) and tries < 16:
        n = gen.randrange(N)
        if n not in imgs:
            imgs.append(n)
        tries += 1
    imgs.sort()
    chosen = []
    seen = set()

    def add(n, p, q):
        if len(chosen) < count and (n, p, q) not in seen:
            seen.add((n, p, q))
            chosen.append((n, p, q))

    for n in imgs:
        for p, q in [(0, 0), (0, Q - 1), (P - 1, 0), (P - 1, Q - 1), (0, Q // 2), (P - 1, Q // 2),
                     (P // 2, 0), (P // 2, Q - 1), (P // 2, Q // 2)]:
            add(n, p, q)
    guard = 0
    while len(chosen) < min(count, len(imgs) * P * Q) and guard < 100 * count:
        add(imgs[gen.randrange(len(imgs))], gen.randrange(P), gen.randrange(Q))
        guard += 1
    return chosen


def reference(torch, F, x, W, b, c, samples):
    """float64 y at the samples: min over K of 2 * (b + sum over the patch of x * W), per group."""
    imgs = sorted({n for n, _, _ in samples})
    local = {n: i for i, n in enumerate(imgs)}
    pad, st, R, S, G = c["pad"], c["stride"], c["R"], c["S"], c.get("groups", 1)
    xs = x[imgs].double()
    if pad:
        xs = F.pad(xs, (pad, pad, pad, pad))
    patches = torch.stack([xs[local[n], :, p * st:p * st + R, q * st:q * st + S] for n, p, q in samples])
    patches = patches.reshape(len(samples), G, -1)                # (samples, groups, C/G*R*S)
    Wg = W.double().reshape(G, c["K"] // G, -1)                   # (groups, K/G, C/G*R*S)
    vals = torch.einsum("sgj,gkj->sgk", patches, Wg).reshape(len(samples), c["K"]) + b.double()
    return (vals * SCALE).min(dim=1).values


def rel_err(torch, y, ref, samples):
    idx_n = torch.tensor([s[0] for s in samples], device=y.device)
    idx_p = torch.tensor([s[1] for s in samples], device=y.device)
    idx_q = torch.tensor([s[2] for s in samples], device=y.device)
    got = y[idx_n, 0, idx_p, idx_q].double()
    if not bool(torch.isfinite(got).all()):
        return float("nan")
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))


def measure(args):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("pytorch_baseline: PyTorch is needed to measure (%s); use --replot to redraw from JSON" % e)
        return None, 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_baseline: no CUDA device; nothing to measure. Run it on the GPU machine.")
        return None, 2
    import random

    torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    dev = torch.device(args.device)
    convred_mod = None
    if args.convred_op:
        import convred as convred_mod  # noqa: F811 - the package built from python/ (PYTHONPATH)
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 60 << 20) or (60 << 20))
    flush = torch.empty(max(256 << 20, 4 * l2), dtype=torch.int8, device=dev)
    device = {"name": props.name, "cc": "%d.%d" % (props.major, props.minor),
              "sms": props.multi_processor_count, "l2_bytes": l2, "memory_bytes": props.total_memory}
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "cudnn_benchmark": bool(args.cudnn_benchmark), "device": device}
    print("pytorch_baseline: %s, torch %s, CUDA %s, cuDNN %s, cudnn.benchmark=%s" %
          (props.name, torch.__version__, torch.version.cuda, meta["cudnn"], args.cudnn_benchmark))
    print("iters %d (median), warm-up %d, L2 flushed before each timed run, %d sampled pixels per case" %
          (args.iters, args.warmup, args.samples))

    def model(x, W, b, stride, pad, groups):
        return torch.min(F.conv2d(x, W, b, stride=stride, padding=pad, groups=groups) * SCALE, dim=1, keepdim=True)[0]

    def model_autocast_bf16(x, W, b, stride, pad, groups):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(x, W, b, stride, pad, groups)

    def model_autocast_fp16(x, W, b, stride, pad, groups):
        with torch.autocast("cuda", dtype=torch.float16):
            return model(x, W, b, stride, pad, groups)

    # One compiled function per variant serves every case: with dynamic=False each new shape (and stride,
    # padding, groups) is a recompile of the same code object. Dynamo refuses recompiles past its limit
    # (8 per code object by default) and then runs the function eagerly: raise the limits above the number
    # of cases so that every shape gets its own graph.
    import torch._dynamo

    limit = 4 * len(args.cases) + 16
    dyn = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dyn, key):
            try:
                setattr(dyn, key, max(int(getattr(dyn, key)), limit))
            except Exception:  # noqa: BLE001 - a deprecated alias may refuse; the other name holds the value
                pass
    if hasattr(dyn, "fail_on_recompile_limit_hit"):
        dyn.fail_on_recompile_limit_hit = True  # a refused recompile fails the row instead of timing eager
    meta["dynamo_recompile_limit"] = limit

    compiled = torch.compile(model, dynamic=False) if not args.no_compile else None
    # the fastest peers of the 16-bit maths: torch.compile under autocast, and with model and x already in
    # bf16 / fp16 (the conversion untimed)
    compiled_ac = {} if args.no_compile else {
        "bf16": torch.compile(model_autocast_bf16, dynamic=False),
        "fp16": torch.compile(model_autocast_fp16, dynamic=False)}
    compiled_native = {} if args.no_compile else {
        "bf16": torch.compile(model, dynamic=False), "fp16": torch.compile(model, dynamic=False)}
    failures = 0
    compile_s_total = 0.0
    t_all = time.time()
    cases = []
    for name in args.cases:
        c = CASES[name]
        suite = bool(c.get("suite"))
        P, Q = case_dims(c)
        flops = case_flops(c)
        print("\n[%s] %s, %.1f GFLOP" % (name, shape_string(c), flops / 1e9))
        if suite:
            print("  %s" % c["source"])
        seed = args.seed + ALL_ORDER.index(name)
        torch.manual_seed(seed)
        x = torch.randn(c["N"], c["C"], c["H"], c["W"], device=dev)
        conv = torch.nn.Conv2d(c["C"], c["K"], (c["R"], c["S"]), stride=c["stride"], padding=c["pad"],
                               groups=c.get("groups", 1)).to(dev)
        W = conv.weight.detach().contiguous()
        b = conv.bias.detach().contiguous()
        del conv
        gen = random.Random(seed)
        samples = sample_pixels(c, args.samples, gen)
        t0 = time.time()
        ref = reference(torch, F, x, W, b, c, samples)
        torch.cuda.synchronize()
        print("  float64 reference: %d pixels, %.2f s" % (len(samples), time.time() - t0))
        st, pad, grp = c["stride"], c["pad"], c.get("groups", 1)

        def eager():
            return model(x, W, b, st, pad, grp)

        def eager_bf16():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model(x, W, b, st, pad, grp)

        variants = [("torch eager tf32", "pytorch-eager", "tf32", True, eager, CEIL_TF32),
                    ("torch eager fp32", "pytorch-eager", "fp32", False, eager, CEIL_FFMA),
                    ("torch eager bf16 autocast", "pytorch-eager", "bf16", True, eager_bf16, CEIL_BF16)]
        if compiled is not None:
            variants.append(("torch.compile tf32", "pytorch-compile", "tf32", True,
                             lambda: compiled(x, W, b, st, pad, grp), CEIL_TF32))
            for lo, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                ac = compiled_ac[lo]
                variants.append(("torch.compile %s autocast" % lo, "pytorch-compile", "bf16", True,
                                 (lambda ac=ac: ac(x, W, b, st, pad, grp)), CEIL_BF16))
                if suite:
                    continue  # the suite has no model+x rows (and needs no 16-bit copies of x)
                xl, Wl, bl, nat = x.to(dt), W.to(dt), b.to(dt), compiled_native[lo]
                variants.append(("torch.compile %s model+x" % lo, "pytorch-compile", "bf16", True,
                                 (lambda nat=nat, xl=xl, Wl=Wl, bl=bl: nat(xl, Wl, bl, st, pad, grp)), CEIL_BF16))
        if suite:
            variants = [v for v in variants if v[0] in SUITE_VARIANTS]
        op_mods = {}
        if args.convred_op:
            for vname, m, _ in CONVRED_OP_ROWS:
                mod = convred_mod.nn.Conv2dReduce(c["C"], c["K"], (c["R"], c["S"]), stride=st, padding=pad, groups=grp,
                                                  scale=SCALE, reduce="min", math=m, device=dev)
                with torch.no_grad():
                    mod.weight.copy_(W)
                    mod.bias.copy_(b)
                op_mods[vname] = mod
                variants.append((vname, "convred-op", m, True, (lambda mod=mod: mod(x)),
                                 CEIL_BF16 if m == "bf16" else CEIL_TF32))
        rows = []
        for vname, family, cls, tf32, fn, ceil in variants:
            op_row = family == "convred-op"
            r = {"variant": vname, "family": family, "source": "python" if op_row else "pytorch", "math": cls,
                 "layout": "nchw", "precision_class": "fp32" if cls in ("fp32", "accurate") else "tf32",
                 "pipeline": True, "ceiling_tflops": ceil, "tolerance": row_tolerance(cls) if op_row else TOL[cls],
                 "ms": None, "ms_min": None, "tflops": None,
                 "pct_ceiling": None, "rel_err": None, "above_tolerance": False, "note": "", "error": None}
            print("  %-40s " % vname, end="", flush=True)
            try:
                set_tf32(torch, tf32)
                r["note"] = "cudnn.allow_tf32=%s" % get_tf32(torch)
                t0 = time.time()
                with torch.no_grad():
                    y = fn()  # checked run (compiles torch.compile's graph on its first call)
                    torch.cuda.synchronize()
                    first_s = time.time() - t0
                    if op_row:
                        r["algo"] = op_mods[vname].kernel_for(x)
                        r["kernel"] = r["algo"].split(" ")[0]
                        r["note"] = "convred.nn.Conv2dReduce (filter packed on the first call, untimed)"
                    if family == "pytorch-compile":
                        r["note"] += "; first call (compile) %.1f s" % first_s
                        r["compile_s"] = first_s
                        compile_s_total += first_s
                    e = rel_err(torch, y, ref, samples)
                    del y
                    ms, ms_min = time_cuda(torch, fn, args.iters, args.warmup, flush)
                r.update(ms=ms, ms_min=ms_min, tflops=flops / (ms * 1e-3) / 1e12, rel_err=None if math.isnan(e) else e)
                r["pct_ceiling"] = r["tflops"] / ceil * 100.0
                r["above_tolerance"] = not (e <= r["tolerance"])
                print("%9.3f ms  err %.2e%s" % (ms, e, "  ABOVE TOLERANCE" if r["above_tolerance"] else ""))
            except Exception as ex:  # noqa: BLE001 - every failure is reported and counted
                failures += 1
                r["error"] = "%s: %s" % (type(ex).__name__, ex)
                print("FAILED: %s" % r["error"])
                traceback.print_exc(limit=3)
            finally:
                set_tf32(torch, True)
            rows.append(r)
            torch.cuda.empty_cache()
        cases.append({"name": name, "shape": shape_string(c), "flops": flops, "P": P, "Q": Q, "groups": 1,
                      "suite": False, **c, "sample_pixels": len(samples), "rows": rows})
        x = W = b = ref = None  # free this case's tensors (the closures above refer to the names)
        torch.cuda.empty_cache()
    meta["compile_s_total"] = compile_s_total
    meta["wall_s"] = time.time() - t_all
    print("\ntorch.compile first calls (compiles) %.1f s in all; %d cases in %.1f s" %
          (compile_s_total, len(cases), meta["wall_s"]))
    return {"meta": meta, "cases": cases}, (1 if failures else 0)


# --------------------------------------------------------------------------------------------------------
# Combining, table, chart (no torch needed)
# --------------------------------------------------------------------------------------------------------


def case_key(name):
    return ALL_ORDER.index(name) if name in ALL_ORDER else len(ALL_ORDER)


def ok_row(r):
    """A row that ran: a median and no error, or only a finite error above its tolerance (timed all the same;
    the summary lists it with the failed rows)."""
    if not r or not isinstance(r.get("ms"), (int, float)) or not r["ms"] > 0:
        return False
    return not r.get("error") or (bool(r.get("above_tolerance")) and r.get("rel_err") is not None)


def find_row(c, *variants):
    """The first of `variants` present in case c that ran, else None."""
    for v in variants:
        for r in c.get("rows", []):
            if r.get("variant") == v and ok_row(r):
                return r
    return None


def row_precision(r):
    """tf32, bf16, fp16 or fp32 (fp32-level accuracy) for a convred or cuDNN row; None for others."""
    if r.get("variant") == "convred plan fp32-accurate":
        return "fp32"
    m = r.get("math") or ""
    if m in ("tf32", "cudnn-tf32"):
        return "tf32"
    if m in ("bf16", "fp16"):
        return m
    if m in ("ieee", "tf32x3", "accurate", "cudnn-fp32"):
        return "fp32"
    return None


def row_tolerance(math_name):
    return {"tf32": TOL["tf32"], "bf16": TOL["bf16"]}.get(math_name, 1e-6)


# torch.compile of the same precision as a convred / cuDNN row (fp32-level accuracy has none)
COMPILE_PEER = {"tf32": "torch.compile tf32", "bf16": "torch.compile bf16 autocast",
                "fp16": "torch.compile fp16 autocast"}


def combine(pt, cv, cv_path):
    """Merges the PyTorch results (pt) with the C++ JSON (cv) case by case; adds speedups vs PyTorch and
    the summary. Rows that failed (an error, no median) or are missing are left out of every ratio."""
    by_name = {}
    order = []
    for src, data in (("convred", cv), ("pytorch", pt)):
        if not data:
            continue
        for c in data.get("cases", []):
            if c.get("name") is None:
                continue
            if c["name"] not in by_name:
                entry = {k: v for k, v in c.items() if k != "rows"}
                known = CASES.get(c["name"], {})
                for k in ("groups", "suite", "layer", "source"):  # older JSONs lack them
                    if entry.get(k) in (None, ""):
                        entry[k] = known.get(k, {"groups": 1, "suite": False}.get(k, ""))
                entry["rows"] = []
                by_name[c["name"]] = entry
                order.append(c["name"])
            for r in c.get("rows", []) or []:
                r = dict(r)
                r.setdefault("source", src)
                by_name[c["name"]]["rows"].append(r)
    cases = [by_name[n] for n in sorted(order, key=case_key)]
    for c in cases:
        eager = find_row(c, "torch eager tf32")
        comp = find_row(c, "torch.compile tf32")
        for r in c["rows"]:
            ok = r.get("pipeline") and ok_row(r)
            r["speedup_vs_torch_eager"] = eager["ms"] / r["ms"] if ok and eager else None
            r["speedup_vs_torch_compile"] = comp["ms"] / r["ms"] if ok and comp else None
            peer = COMPILE_PEER.get(row_precision(r)) if r.get("source") != "pytorch" else None
            peer_row = find_row(c, peer) if peer else None
            r["speedup_vs_torch_compile_same_precision"] = peer_row["ms"] / r["ms"] if ok and peer_row else None
    out = {"tool": "pytorch_baseline", "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "pytorch": pt.get("meta") if pt else None, "convred_json": cv_path,
           "convred": {k: v for k, v in cv.items() if k != "cases"} if cv else None, "cases": cases}
    out["summary"] = summarize(out)
    return out


# The summary's precisions: convred's row (the planner's; for the four legacy cases the packed entry point,
# which makes the same choice), the torch.compile peer, whether that peer has the same precision, and
# PyTorch eager in the same precision (TF32 convolutions, bf16 autocast, strict fp32).
SUMMARY_PRECISIONS = [
    ("tf32", ("convred plan tf32", "convred fused wgmma tf32"), "torch.compile tf32", True, "torch eager tf32"),
    ("bf16", ("convred plan bf16", "convred fused wgmma bf16"), "torch.compile bf16 autocast", True,
     "torch eager bf16 autocast"),
    ("fp32-accurate", ("convred plan fp32-accurate", "convred fused wgmma tf32x3"), "torch.compile tf32", False,
     "torch eager fp32"),
]
EAGER = "torch eager tf32"  # PyTorch's default: eager, TF32 convolutions


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def summarize(combined):
    """Per precision: geometric-mean speed-up of convred over torch.compile (same precision for TF32 and
    bf16; the TF32 peer for fp32-accurate, which has no torch.compile counterpart), the layers where
    convred is slower, every layer where a convred row is slower than PyTorch eager (default, TF32), and
    every layer where it is slower than PyTorch eager in its own precision (TF32; bf16 autocast; strict
    fp32 for fp32-accurate). Only the suite's cases when there are any (the legacy "seed" duplicates
    "seed.n64")."""
    cases = [c for c in combined.get("cases", []) if c.get("suite")]
    scope = "suite"
    if not cases:
        cases, scope = combined.get("cases", []), "all cases"
    out = {"scope": scope, "cases": len(cases), "eager_reference": EAGER, "precisions": {},
           "slower_than_eager": [], "slower_than_eager_same_precision": [], "accurate_above_1e-6": [],
           "failed_rows": [], "missing_rows": []}
    for c in cases:
        for r in c.get("rows", []):
            if r.get("error"):
                out["failed_rows"].append({"case": c["name"], "variant": r.get("variant"),
                                           "error": " ".join(str(r["error"]).split())[:200]})
    for key, mine, peer, same, eager_same in SUMMARY_PRECISIONS:
        entries, missing = [], []
        for c in cases:
            cv, pk, eager, es = find_row(c, *mine), find_row(c, peer), find_row(c, EAGER), find_row(c, eager_same)
            if cv is None or pk is None:
                # absent from this merge (e.g. a legacy case without the planner rows) or failed
                want = [v for v, r in ((mine[0], cv), (peer, pk)) if r is None]
                missing.append({"case": c["name"], "rows": want})
                continue
            e = {"case": c["name"], "N": c.get("N"), "variant": cv["variant"], "ms": cv["ms"], "peer_ms": pk["ms"],
                 "speedup": pk["ms"] / cv["ms"], "kernel": cv.get("kernel") or "", "rel_err": cv.get("rel_err")}
            if eager:
                e["eager_ms"] = eager["ms"]
                e["speedup_vs_eager"] = eager["ms"] / cv["ms"]
            if es:
                e["eager_same_ms"] = es["ms"]
                e["speedup_vs_eager_same"] = es["ms"] / cv["ms"]
            entries.append(e)
        sp = [e["speedup"] for e in entries]
        n1 = [e["speedup"] for e in entries if e["N"] == 1]
        train = [e["speedup"] for e in entries if e["N"] != 1]
        slower = [e for e in entries if e["speedup"] < 1.0]
        out["precisions"][key] = {
            "convred": mine[0], "peer": peer, "peer_same_precision": same, "eager_same_precision": eager_same,
            "layers": len(entries),
            "geomean_speedup": geomean(sp), "geomean_speedup_n1": geomean(n1), "geomean_speedup_train": geomean(train),
            "min": min(entries, key=lambda e: e["speedup"]) if entries else None,
            "max": max(entries, key=lambda e: e["speedup"]) if entries else None,
            "slower_count": len(slower), "slower": [{"case": e["case"], "speedup": e["speedup"]} for e in slower],
            "missing": missing, "entries": entries}
        out["missing_rows"] += [dict(m, precision=key) for m in missing]
        for e in entries:
            if "eager_ms" in e and e["ms"] > e["eager_ms"]:
                out["slower_than_eager"].append({"case": e["case"], "precision": key, "ms": e["ms"],
                                                 "eager_ms": e["eager_ms"], "speedup": e["speedup_vs_eager"],
                                                 "kernel": e["kernel"]})
            if "eager_same_ms" in e and e["ms"] > e["eager_same_ms"]:
                out["slower_than_eager_same_precision"].append(
                    {"case": e["case"], "precision": key, "eager": eager_same, "ms": e["ms"],
                     "eager_ms": e["eager_same_ms"], "speedup": e["speedup_vs_eager_same"], "kernel": e["kernel"]})
            if key == "fp32-accurate" and e.get("rel_err") is not None and e["rel_err"] > 1e-6:
                out["accurate_above_1e-6"].append({"case": e["case"], "rel_err": e["rel_err"]})
    # the PyTorch op against the C++ plan row of the same precision (within 5 % or 3 us) and PyTorch eager
    op = {"rows": [], "outside_5pct_or_3us": [], "slower_than_eager": []}
    for c in cases:
        for vname, m, plan_name in CONVRED_OP_ROWS:
            o, p = find_row(c, vname), find_row(c, plan_name)
            if o is None or p is None:
                continue
            eager = find_row(c, {"tf32": EAGER, "bf16": "torch eager bf16 autocast"}.get(m, EAGER))
            e = {"case": c["name"], "op": vname, "op_ms": o["ms"], "plan_ms": p["ms"], "ratio": o["ms"] / p["ms"],
                 "eager_ms": eager["ms"] if eager else None}
            op["rows"].append(e)
            if o["ms"] > 1.05 * p["ms"] and o["ms"] - p["ms"] > 0.003:
                op["outside_5pct_or_3us"].append(e)
            if eager and m in ("tf32", "bf16") and o["ms"] > eager["ms"]:
                op["slower_than_eager"].append(e)
    if op["rows"]:
        op["geomean_ratio"] = geomean([e["ratio"] for e in op["rows"]])
        out["python_op_vs_plan"] = op
    return out


def fmt(v, f, na="-"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return na
    return f % v


def markdown_rows(cases):
    """Every row of every case (the four legacy cases' table)."""
    lines = ["| case | variant | median ms | TFLOP/s | % ceiling | rel err vs fp64 | x eager | x compile | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in cases:
        for r in c["rows"]:
            if r.get("family") == "setup" and not r.get("error"):
                continue
            tput = fmt(r.get("gbps"), "%.0f GB/s") if r.get("gbps") else fmt(r.get("tflops"), "%.1f")
            err = fmt(r.get("rel_err"), "%.1e") + ("!" if r.get("above_tolerance") else "")
            note = r.get("algo") or r.get("note") or ""
            if r.get("error"):
                note = "FAILED: " + str(r["error"])
            variant = r.get("variant", "?") if r.get("pipeline") else "*%s*" % r.get("variant", "?")
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["name"], variant, fmt(r.get("ms"), "%.3f"), tput, fmt(r.get("pct_ceiling"), "%.0f%%"), err,
                fmt(r.get("speedup_vs_torch_eager"), "%.2f"), fmt(r.get("speedup_vs_torch_compile"), "%.2f"),
                note.replace("|", "/")))
    lines.append("")
    lines.append("Median of timed runs (CUDA events, L2 flushed before each). TFLOP/s = 2*N*P*Q*K*C*R*S / t; "
                 "%% ceiling vs the H200's measured FFMA %.1f / TF32 %.0f (3xTF32 %.0f) / BF16 %.0f TFLOP/s "
                 "(channel_reduce: vs 4.18 TB/s). rel err = ||y-ref||/||ref|| vs float64 on sampled pixels, "
                 "'!' above the docs/tolerances.md tolerance. x eager / x compile = torch eager tf32 (or torch.compile) "
                 "median / this median. Italic rows are parts of a pipeline (conv only, reduction only)."
                 % (CEIL_FFMA, CEIL_TF32, CEIL_TF32 / 3, CEIL_BF16))
    return "\n".join(lines)


KERNEL_ABBR = {"wgmma": "W", "mma.sync": "M", "simt": "S", "direct": "D"}


def markdown_suite(cases):
    """One line per suite case: each row's median ms and the speed-ups over torch.compile."""
    lines = ["| case | shape | kernel tf32/bf16/acc | convred tf32 | convred bf16 | convred fp32-acc (err) | "
             "cuDNN tf32 + reduce | torch eager | compile tf32 | compile bf16 | tf32 x compile | bf16 x compile |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def ms_or_fail(c, v):
        r = find_row(c, v)
        if r:
            return "%.3f%s" % (r["ms"], "!" if r.get("above_tolerance") else "")
        failed = [x for x in c["rows"] if x.get("variant") == v and x.get("error")]
        return "FAILED" if failed else "-"

    for c in cases:
        plans = [find_row(c, v) for v in ("convred plan tf32", "convred plan bf16", "convred plan fp32-accurate")]
        kern = "/".join(KERNEL_ABBR.get((r or {}).get("kernel"), "?") if r else "-" for r in plans)
        cudnn = [r for r in (find_row(c, "cudnn tf32 nchw +reduce"), find_row(c, "cudnn tf32 nhwc +reduce")) if r]
        best = min(cudnn, key=lambda r: r["ms"]) if cudnn else None
        acc = ms_or_fail(c, "convred plan fp32-accurate")
        if plans[2] and plans[2].get("rel_err") is not None:
            acc += " (%.0e)" % plans[2]["rel_err"]
        cells = [c["name"], c.get("shape", ""), kern, ms_or_fail(c, "convred plan tf32"),
                 ms_or_fail(c, "convred plan bf16"), acc,
                 ("%.3f %s" % (best["ms"], best.get("layout", ""))) if best else "-", ms_or_fail(c, EAGER),
                 ms_or_fail(c, "torch.compile tf32"), ms_or_fail(c, "torch.compile bf16 autocast"),
                 fmt((plans[0] or {}).get("speedup_vs_torch_compile_same_precision"), "%.2f"),
                 fmt((plans[1] or {}).get("speedup_vs_torch_compile_same_precision"), "%.2f")]
        lines.append("| " + " | ".join(str(x).replace("|", "/") for x in cells) + " |")
    lines.append("")
    lines.append("Median ms (CUDA events, L2 flushed before each run). kernel: the planner's choice per precision "
                 "(W wgmma, M mma.sync, S simt, D direct; the row's \"algo\" in the JSON says why). cuDNN: the faster of NCHW "
                 "and NHWC (x converted untimed) + convred's reduction. x compile = torch.compile of the same "
                 "precision (TF32; bf16 under autocast) / convred. err: ||y-ref||/||ref|| vs float64, sampled; "
                 "'!' above the row's tolerance (docs/tolerances.md).")
    return "\n".join(lines)


def markdown_op_vs_plan(op):
    """The PyTorch op's rows against the C++ plan rows of the same precision."""
    if not op or not op.get("rows"):
        return []
    lines = ["", "### The PyTorch op (convred.nn.Conv2dReduce) vs the C++ plan, same run", "",
             "geomean op/plan time ratio %.3f over %d rows; outside 5 %% or 3 us: %d; slower than PyTorch eager "
             "(same precision): %d" % (op["geomean_ratio"], len(op["rows"]), len(op["outside_5pct_or_3us"]),
                                       len(op["slower_than_eager"])), "",
             "| case | op | op ms | plan ms | ratio | eager ms |", "|---|---|---:|---:|---:|---:|"]
    for e in op["rows"]:
        lines.append("| %s | %s | %.4f | %.4f | %.3f | %s |" % (e["case"], e["op"], e["op_ms"], e["plan_ms"], e["ratio"],
                                                               fmt(e["eager_ms"], "%.4f")))
    return lines


def markdown_summary(sm):
    if not sm:
        return ""
    lines = ["### Summary (%s: %d case%s)" % (sm["scope"], sm["cases"], "" if sm["cases"] == 1 else "s"), "",
             "| convred | vs | layers | geomean speed-up | batch 1 | training batch | min | max | slower |",
             "|---|---|---:|---:|---:|---:|---|---|---:|"]
    for key, p in sm["precisions"].items():
        lo, hi = p.get("min"), p.get("max")
        lines.append("| %s | %s%s | %d | %s | %s | %s | %s | %s | %d |" % (
            key, p["peer"], "" if p["peer_same_precision"] else " (a TF32 peer: less accurate)", p["layers"],
            fmt(p["geomean_speedup"], "**%.2fx**"), fmt(p["geomean_speedup_n1"], "%.2fx"),
            fmt(p["geomean_speedup_train"], "%.2fx"),
            "%.2fx %s" % (lo["speedup"], lo["case"]) if lo else "-",
            "%.2fx %s" % (hi["speedup"], hi["case"]) if hi else "-",
            p["slower_count"]))
    lines.append("")
    for key, p in sm["precisions"].items():
        if p["slower"]:
            lines.append("- convred %s slower than %s on %d: %s" % (
                key, p["peer"], p["slower_count"],
                ", ".join("%s (%.2fx)" % (e["case"], e["speedup"]) for e in p["slower"])))
    if sm["slower_than_eager"]:
        for key in sm["precisions"]:
            es = [e for e in sm["slower_than_eager"] if e["precision"] == key]
            if es:
                lines.append("- convred %s slower than PyTorch eager (%s) on %d: %s" % (
                    key, sm["eager_reference"], len(es),
                    ", ".join("%s (%.2fx, %s)" % (e["case"], e["speedup"], e["kernel"] or "?") for e in es)))
    else:
        lines.append("- no layer slower than PyTorch eager (%s) in any precision" % sm["eager_reference"])
    same = sm.get("slower_than_eager_same_precision", [])
    for key, p in sm["precisions"].items():
        es = [e for e in same if e["precision"] == key]
        if es:
            lines.append("- convred %s slower than PyTorch eager in its own precision (%s) on %d: %s" % (
                key, p.get("eager_same_precision"), len(es),
                ", ".join("%s (%.2fx)" % (e["case"], e["speedup"]) for e in es)))
        elif p.get("eager_same_precision") and any("eager_same_ms" in e for e in p["entries"]):
            lines.append("- convred %s: no layer slower than PyTorch eager in its own precision (%s)" % (
                key, p["eager_same_precision"]))
    if sm["accurate_above_1e-6"]:
        lines.append("- fp32-accurate above 1e-6 error vs float64: %s" % ", ".join(
            "%s %.1e" % (e["case"], e["rel_err"]) for e in sm["accurate_above_1e-6"]))
    if sm["failed_rows"]:
        lines.append("- failed rows (%d): %s" % (len(sm["failed_rows"]), "; ".join(
            "%s %s: %s" % (e["case"], e["variant"], e["error"][:120]) for e in sm["failed_rows"])))
    for key, p in sm["precisions"].items():
        if not p["missing"]:
            continue
        if not p["layers"] and all(p["convred"] in m["rows"] for m in p["missing"]):
            lines.append("- %s: no convred rows in this merge" % key)
        elif not p["layers"] and all(p["peer"] in m["rows"] for m in p["missing"]):
            lines.append("- %s: no %s rows in this merge" % (key, p["peer"]))
        else:
            lines.append("- %s not compared on %d (row missing or failed): %s" % (key, len(p["missing"]), ", ".join(
                "%s [%s]" % (m["case"], ", ".join(m["rows"])) for m in p["missing"])))
    lines += markdown_op_vs_plan(sm.get("python_op_vs_plan"))
    return "\n".join(lines)


def markdown(combined):
    cases = combined.get("cases", [])
    suite = [c for c in cases if c.get("suite")]
    other = [c for c in cases if not c.get("suite")]
    parts = []
    if other or not suite:
        parts.append(markdown_rows(other))
    if suite:
        parts.append(markdown_suite(suite))
    sm = combined.get("summary") or summarize(combined)
    parts.append(markdown_summary(sm))
    return "\n\n".join(p for p in parts if p)


FAMILY_COLOURS = {
    "convred-fused": "#1f77b4",
    "convred-plan": "#08519c",
    "convred-unfused": "#9ecae1",
    "cudnn": "#7f7f7f",
    "pytorch-eager": "#ff7f0e",
    "pytorch-compile": "#d62728",
}

# The compact chart: (label, row variants (first that ran), colour, marker)
SPEEDUP_SERIES = [
    ("convred tf32 vs torch.compile tf32", "tf32", "#1f77b4", "o"),
    ("convred bf16 vs torch.compile bf16 autocast", "bf16", "#2ca02c", "s"),
    ("convred fp32-accurate vs torch.compile tf32", "fp32-accurate", "#9467bd", "^"),
]
TIME_SERIES = [
    ("convred tf32", ("convred plan tf32", "convred fused wgmma tf32"), "#1f77b4", "o"),
    ("convred bf16", ("convred plan bf16", "convred fused wgmma bf16"), "#2ca02c", "s"),
    ("convred fp32-accurate", ("convred plan fp32-accurate", "convred fused wgmma tf32x3"), "#9467bd", "^"),
    ("cuDNN tf32 nchw + reduce", ("cudnn tf32 nchw +reduce",), "#7f7f7f", "v"),
    ("cuDNN tf32 nhwc + reduce", ("cudnn tf32 nhwc +reduce",), "#bdbdbd", "v"),
    ("torch eager tf32", (EAGER,), "#ff7f0e", "D"),
    ("torch.compile tf32", ("torch.compile tf32",), "#d62728", "x"),
    ("torch.compile bf16 autocast", ("torch.compile bf16 autocast",), "#e377c2", "+"),
]


def plot(combined, path):
    try:
        import matplotlib
    except ImportError:
        print("plot: matplotlib is not installed here, no PNG written; redraw it elsewhere with\n"
              "  python3 bench/pytorch_baseline.py --replot COMBINED.json --png %s" % path)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if any(c.get("suite") for c in combined.get("cases", [])) or len(combined.get("cases", [])) > 6:
        return plot_compact(combined, path, plt)
    return plot_panels(combined, path, plt, Patch)


def plot_compact(combined, path, plt):
    """One line per case: left, speed-up of each convred row over torch.compile (log); right, median ms of
    every row (log). Missing or failed rows are simply absent (the summary lists them)."""
    cases = [c for c in combined.get("cases", []) if any(ok_row(r) and r.get("pipeline") for r in c["rows"])]
    if not cases:
        print("plot: no timed pipeline rows; no chart written")
        return False
    sm = combined.get("summary") or summarize(combined)
    n = len(cases)
    width, height = 15.0, 0.27 * n + 2.2  # inches; margins below are fixed in inches
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(width, height), sharey=True,
                                   gridspec_kw={"width_ratios": [1, 1.25]})
    fig.subplots_adjust(left=2.7 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 1.25 / height,
                        wspace=0.04)
    ypos = {c["name"]: n - 1 - i for i, c in enumerate(cases)}
    labels = []
    for c in cases:
        r = find_row(c, "convred plan tf32", "convred fused wgmma tf32")
        k = (r or {}).get("kernel") or ""
        labels.append("%s%s" % (c["name"], "  [%s]" % k if k else ""))
    all_sp = []
    for label, key, colour, marker in SPEEDUP_SERIES:
        es = [e for e in sm["precisions"].get(key, {}).get("entries", []) if e["case"] in ypos]
        if not es:
            continue
        xs = [e["speedup"] for e in es]
        all_sp += xs
        gm = sm["precisions"][key]["geomean_speedup"]
        ax1.scatter(xs, [ypos[e["case"]] for e in es], color=colour, marker=marker, s=28, zorder=3,
                    label="%s (geomean %.2fx, dashed)" % (label, gm) if gm else label)
        if gm:
            ax1.axvline(gm, color=colour, lw=0.9, ls="--", zorder=2)
    ax1.axvline(1.0, color="black", lw=0.8)
    ax1.set_xscale("log")
    if all_sp:
        ax1.set_xlim(min(min(all_sp), 1.0) / 1.3, max(max(all_sp), 1.0) * 1.3)
    ax1.set_xlabel("speed-up over torch.compile (log; > 1: convred faster)", fontsize=8)
    ax1.set_yticks([ypos[c["name"]] for c in cases])
    ax1.set_yticklabels(labels, fontsize=7)
    ax1.grid(axis="x", which="both", alpha=0.3)
    ax1.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    for label, variants, colour, marker in TIME_SERIES:
        pts = [(find_row(c, *variants), c) for c in cases]
        pts = [(r["ms"], ypos[c["name"]]) for r, c in pts if r]
        if pts:
            ax2.scatter([p[0] for p in pts], [p[1] for p in pts], color=colour, marker=marker, s=22, zorder=3,
                        label=label)
    ax2.set_xscale("log")
    ax2.set_xlabel("median ms (log, lower is better)", fontsize=8)
    ax2.grid(axis="x", which="both", alpha=0.3)
    ax2.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    for ax in (ax1, ax2):
        for i in range(n):
            if i % 2:
                ax.axhspan(i - 0.5, i + 0.5, color="#f2f2f2", zorder=0)
        ax.set_ylim(-0.6, n - 0.4)
    dev = (combined.get("convred") or {}).get("device") or (combined.get("pytorch") or {}).get("device") or {}
    fig.suptitle("y = min_k(2 * conv2d(x, W, b)), %d cases on %s: convred planner vs cuDNN vs PyTorch "
                 "([kernel] = the planner's TF32 choice)" % (n, dev.get("name", "GPU")), fontsize=10,
                 y=1 - 0.12 / height, va="top")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print("wrote %s" % path)
    return True


def plot_panels(combined, path, plt, Patch):
    """One panel per case: a bar per pipeline row, median ms, log scale (for a few cases)."""
    cases = [c for c in combined["cases"] if any(r.get("pipeline") and r.get("ms") for r in c["rows"])]
    if not cases:
        print("plot: no timed pipeline rows; no chart written")
        return False
    ncol = 2 if len(cases) > 1 else 1
    nrow = (len(cases) + ncol - 1) // ncol
    nbars = max(sum(1 for r in c["rows"] if r.get("pipeline") and r.get("ms")) for c in cases)
    fig, axes = plt.subplots(nrow, ncol, figsize=(8 * ncol, 0.38 * nbars * nrow + 1.6 * nrow), squeeze=False)
    for ax, c in zip(axes.flat, cases):
        rows = [r for r in c["rows"] if r.get("pipeline") and r.get("ms")]
        names = [r.get("variant", "?") for r in rows]
        ms = [r["ms"] for r in rows]
        colours = [FAMILY_COLOURS.get(r.get("family"), "#2ca02c") for r in rows]
        ypos = list(range(len(rows)))[::-1]
        ax.barh(ypos, ms, color=colours)
        ax.set_xscale("log")
        ax.set_yticks(ypos)
        ax.set_yticklabels(names, fontsize=8)
        lo, hi = min(ms), max(ms)
        ax.set_xlim(lo / 1.6, hi * 3.0)
        for yp, v, r in zip(ypos, ms, rows):
            label = "%.3g ms" % v
            if r.get("rel_err") is not None:
                label += "  (err %.0e)" % r["rel_err"]
            ax.text(v * 1.05, yp, label, va="center", fontsize=7)
        ax.set_title("%s: %s" % (c["name"], c.get("shape", "")), fontsize=9)
        ax.set_xlabel("median ms (log scale, lower is better)", fontsize=8)
        ax.grid(axis="x", which="both", alpha=0.3)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    handles = [Patch(color=v, label=k) for k, v in FAMILY_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    dev = (combined.get("convred") or {}).get("device") or (combined.get("pytorch") or {}).get("device") or {}
    fig.suptitle("y = min_k(2 * conv2d(x, W, b)) on %s: convred vs cuDNN vs PyTorch" % dev.get("name", "GPU"),
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print("wrote %s" % path)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASE_ORDER),
                    help="comma-separated cases or groups: %s (the default), suite (the %d suite cases), "
                         "suite.n1, suite.train, or one suite case (--list-cases)" % (", ".join(CASE_ORDER),
                                                                                      len(SUITE_ORDER)))
    ap.add_argument("--list-cases", action="store_true", help="print every case with its shape and exit")
    ap.add_argument("--iters", type=int, default=30, help="timed runs per variant, median reported (30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (3)")
    ap.add_argument("--samples", type=int, default=512, help="output pixels checked against float64 (512)")
    ap.add_argument("--seed", type=int, default=2026, help="data seed (2026)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--convred-op", action="store_true",
                    help="also time the convred PyTorch op (convred.nn.Conv2dReduce, tf32 / bf16 / accurate): "
                         "the package must be importable (built from python/)")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True (default: False, PyTorch's default)")
    ap.add_argument("--convred-json", default=None, help="JSON of conv_reduce_bench to merge (optional)")
    ap.add_argument("--json", default="bench_combined.json", help="combined JSON output (bench_combined.json)")
    ap.add_argument("--png", default="bench_results.png", help="bar chart output (bench_results.png); '' for none")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # for testing the flow only
    ap.add_argument("--replot", default=None, metavar="COMBINED_JSON",
                    help="no measuring: redraw the table and chart from an earlier combined JSON")
    ap.add_argument("--pytorch-json", default=None, metavar="PYTORCH_JSON",
                    help="no measuring: merge an earlier run's JSON of this script (PyTorch rows only, e.g. "
                         "measured while the C++ benchmark was building) with --convred-json into --json / --png")
    args = ap.parse_args(argv)

    if args.pytorch_json:
        if not args.convred_json:
            ap.error("--pytorch-json needs --convred-json")
        with open(args.pytorch_json) as f:
            earlier = json.load(f)
        with open(args.convred_json) as f:
            cv = json.load(f)
        pt = {"meta": earlier.get("pytorch"),
              "cases": [dict(c, rows=[r for r in c.get("rows") or [] if r.get("source") == "pytorch"])
                        for c in earlier.get("cases", [])]}
        combined = combine(pt, cv, args.convred_json)
        print(markdown(combined))
        with open(args.json, "w") as f:
            json.dump(combined, f, indent=1)
        print("wrote %s" % args.json)
        if args.png:
            plot(combined, args.png)
        return 0

    if args.replot:
        with open(args.replot) as f:
            combined = json.load(f)
        print(markdown(combined))
        if args.png:
            plot(combined, args.png)
        return 0

    if args.list_cases:
        print("%-34s %-11s %8s  %s" % ("case", "group", "GFLOP", "shape / source"))
        for n in ALL_ORDER:
            c = CASES[n]
            group = ("suite.n1" if c["N"] == 1 else "suite.train") if c.get("suite") else "default"
            print("%-34s %-11s %8.1f  %s%s" % (n, group, case_flops(c) / 1e9, shape_string(c),
                                              "; " + c["source"] if c.get("suite") else ""))
        return 0

    items = [s for s in args.cases.split(",") if s]
    bad = [s for s in items if not select_cases(s)]
    if bad or not items:
        ap.error("--cases: unknown %s (known: %s, suite, suite.n1, suite.train and the suite's cases, see "
                 "--list-cases)" % (", ".join(bad) or "(none given)", ", ".join(CASE_ORDER)))
    args.cases = []
    for s in items:
        args.cases += [n for n in select_cases(s) if n not in args.cases]
    if args.iters < 1 or args.warmup < 0 or args.samples < 1:
        ap.error("--iters >= 1, --warmup >= 0, --samples >= 1")
    if args.iters < 20:
        print("note: --iters %d is below the 20 runs the benchmark rules ask for" % args.iters)

    cv = None
    if args.convred_json:
        try:
            with open(args.convred_json) as f:
                cv = json.load(f)
        except (OSError, ValueError) as e:
            print("pytorch_baseline: cannot read --convred-json %s: %s" % (args.convred_json, e))
            return 1

    pt, rc = measure(args)
    if pt is None:
        return rc
    combined = combine(pt, cv, args.convred_json)
    print()
    print(markdown(combined))
    try:
        with open(args.json, "w") as f:
            json.dump(combined, f, indent=1)
        print("wrote %s" % args.json)
        if args.png:
            plot(combined, args.png)
    except Exception as e:  # noqa: BLE001
        print("pytorch_baseline: writing results failed: %s" % e)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
