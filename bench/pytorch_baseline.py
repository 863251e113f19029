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

Data as the C++ benchmark: x ~ N(0,1) (torch.randn), W and b as torch.nn.Conv2d initialises them
(U(+-1/sqrt(fan_in))). Timing: CUDA events around each run, the L2 flushed before every timed run
(zeroing a buffer of max(256 MiB, 4 x L2), outside the events, as triton.testing.do_bench) and the GPU
held ~0.5 ms (torch.cuda._sleep) so that the run is enqueued before its start event is reached (GPU time
without host launch gaps, as the C++ benchmark), warm-up runs first, median (and min) of --iters runs. torch.backends.cudnn.benchmark stays at PyTorch's default (False)
unless --cudnn-benchmark is given.

With --convred-json (the JSON of build-gpu/bench/conv_reduce_bench) the rows are merged into one table
(markdown on stdout), one JSON (--json) and one PNG bar chart of median ms per variant per case, log scale
(--png). --replot COMBINED.json redraws the table and chart from an earlier combined JSON without a GPU or
PyTorch (matplotlib only).

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
    return 2.0 * c["N"] * P * Q * c["K"] * c["C"] * c["R"] * c["S"]


def shape_string(c):
    P, Q = case_dims(c)
    s = "x(%d,%d,%d,%d) -> K=%d %dx%d" % (c["N"], c["C"], c["H"], c["W"], c["K"], c["R"], c["S"])
    if c["stride"] != 1:
        s += " stride %d" % c["stride"]
    if c["pad"] != 0:
        s += " pad %d" % c["pad"]
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
    """float64 y at the samples: min over K of 2 * (b + sum over the patch of x * W)."""
    imgs = sorted({n for n, _, _ in samples})
    local = {n: i for i, n in enumerate(imgs)}
    pad, st, R, S = c["pad"], c["stride"], c["R"], c["S"]
    xs = x[imgs].double()
    if pad:
        xs = F.pad(xs, (pad, pad, pad, pad))
    patches = torch.stack([xs[local[n], :, p * st:p * st + R, q * st:q * st + S].reshape(-1) for n, p, q in samples])
    vals = patches @ W.double().reshape(c["K"], -1).t() + b.double()
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

    def model(x, W, b, stride, pad):
        return torch.min(F.conv2d(x, W, b, stride=stride, padding=pad) * SCALE, dim=1, keepdim=True)[0]

    def model_autocast_bf16(x, W, b, stride, pad):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(x, W, b, stride, pad)

    def model_autocast_fp16(x, W, b, stride, pad):
        with torch.autocast("cuda", dtype=torch.float16):
            return model(x, W, b, stride, pad)

    compiled = torch.compile(model, dynamic=False) if not args.no_compile else None
    # the fastest peers of the 16-bit maths: torch.compile under autocast, and with model and x already in
    # bf16 / fp16 (the conversion untimed)
    compiled_ac = {} if args.no_compile else {
        "bf16": torch.compile(model_autocast_bf16, dynamic=False),
        "fp16": torch.compile(model_autocast_fp16, dynamic=False)}
    compiled_native = {} if args.no_compile else {
        "bf16": torch.compile(model, dynamic=False), "fp16": torch.compile(model, dynamic=False)}
    failures = 0
    cases = []
    for name in args.cases:
        c = CASES[name]
        P, Q = case_dims(c)
        flops = case_flops(c)
        print("\n[%s] %s, %.1f GFLOP" % (name, shape_string(c), flops / 1e9))
        seed = args.seed + CASE_ORDER.index(name)
        torch.manual_seed(seed)
        x = torch.randn(c["N"], c["C"], c["H"], c["W"], device=dev)
        conv = torch.nn.Conv2d(c["C"], c["K"], (c["R"], c["S"]), stride=c["stride"], padding=c["pad"]).to(dev)
        W = conv.weight.detach().contiguous()
        b = conv.bias.detach().contiguous()
        del conv
        gen = random.Random(seed)
        samples = sample_pixels(c, args.samples, gen)
        t0 = time.time()
        ref = reference(torch, F, x, W, b, c, samples)
        torch.cuda.synchronize()
        print("  float64 reference: %d pixels, %.2f s" % (len(samples), time.time() - t0))
        st, pad = c["stride"], c["pad"]

        def eager():
            return model(x, W, b, st, pad)

        def eager_bf16():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model(x, W, b, st, pad)

        variants = [("torch eager tf32", "pytorch-eager", "tf32", True, eager, CEIL_TF32),
                    ("torch eager fp32", "pytorch-eager", "fp32", False, eager, CEIL_FFMA),
                    ("torch eager bf16 autocast", "pytorch-eager", "bf16", True, eager_bf16, CEIL_BF16)]
        if compiled is not None:
            variants.append(("torch.compile tf32", "pytorch-compile", "tf32", True,
                             lambda: compiled(x, W, b, st, pad), CEIL_TF32))
            for lo, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                ac = compiled_ac[lo]
                variants.append(("torch.compile %s autocast" % lo, "pytorch-compile", "bf16", True,
                                 (lambda ac=ac: ac(x, W, b, st, pad)), CEIL_BF16))
                xl, Wl, bl, nat = x.to(dt), W.to(dt), b.to(dt), compiled_native[lo]
                variants.append(("torch.compile %s model+x" % lo, "pytorch-compile", "bf16", True,
                                 (lambda nat=nat, xl=xl, Wl=Wl, bl=bl: nat(xl, Wl, bl, st, pad)), CEIL_BF16))
        rows = []
        for vname, family, cls, tf32, fn, ceil in variants:
            r = {"variant": vname, "family": family, "source": "pytorch", "math": cls, "layout": "nchw",
                 "precision_class": "fp32" if cls == "fp32" else "tf32", "pipeline": True,
                 "ceiling_tflops": ceil, "tolerance": TOL[cls], "ms": None, "ms_min": None, "tflops": None,
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
                    if family == "pytorch-compile":
                        r["note"] += "; first call (compile) %.1f s" % first_s
                    e = rel_err(torch, y, ref, samples)
                    del y
                    ms, ms_min = time_cuda(torch, fn, args.iters, args.warmup, flush)
                r.update(ms=ms, ms_min=ms_min, tflops=flops / (ms * 1e-3) / 1e12, rel_err=None if math.isnan(e) else e)
                r["pct_ceiling"] = r["tflops"] / ceil * 100.0
                r["above_tolerance"] = not (e <= TOL[cls])
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
        cases.append({"name": name, "shape": shape_string(c), "flops": flops, "P": P, "Q": Q, **c,
                      "sample_pixels": len(samples), "rows": rows})
        x = W = b = ref = None  # free this case's tensors (the closures above refer to the names)
        torch.cuda.empty_cache()
    return {"meta": meta, "cases": cases}, (1 if failures else 0)


# --------------------------------------------------------------------------------------------------------
# Combining, table, chart (no torch needed)
# --------------------------------------------------------------------------------------------------------


def combine(pt, cv, cv_path):
    """Merges the PyTorch results (pt) with the C++ JSON (cv) case by case; adds speedups vs PyTorch."""
    by_name = {}
    order = []
    for src, data in (("convred", cv), ("pytorch", pt)):
        if not data:
            continue
        for c in data.get("cases", []):
            if c["name"] not in by_name:
                entry = {k: v for k, v in c.items() if k != "rows"}
                entry["rows"] = []
                by_name[c["name"]] = entry
                order.append(c["name"])
            for r in c.get("rows", []):
                r = dict(r)
                r.setdefault("source", src)
                by_name[c["name"]]["rows"].append(r)
    cases = [by_name[n] for n in sorted(order, key=lambda n: CASE_ORDER.index(n) if n in CASE_ORDER else 99)]
    for c in cases:
        ref = {}
        for r in c["rows"]:
            if r.get("variant") in ("torch eager tf32", "torch.compile tf32") and r.get("ms"):
                ref[r["variant"]] = r["ms"]
        for r in c["rows"]:
            ok = r.get("pipeline") and r.get("ms")
            r["speedup_vs_torch_eager"] = ref["torch eager tf32"] / r["ms"] if ok and "torch eager tf32" in ref else None
            r["speedup_vs_torch_compile"] = (ref["torch.compile tf32"] / r["ms"]
                                             if ok and "torch.compile tf32" in ref else None)
    out = {"tool": "pytorch_baseline", "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "pytorch": pt.get("meta") if pt else None, "convred_json": cv_path,
           "convred": {k: v for k, v in cv.items() if k != "cases"} if cv else None, "cases": cases}
    return out


def fmt(v, f, na="-"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return na
    return f % v


def markdown(combined):
    lines = ["| case | variant | median ms | TFLOP/s | % ceiling | rel err vs fp64 | x eager | x compile | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in combined["cases"]:
        for r in c["rows"]:
            if r.get("family") == "setup":
                continue
            tput = fmt(r.get("gbps"), "%.0f GB/s") if r.get("gbps") else fmt(r.get("tflops"), "%.1f")
            err = fmt(r.get("rel_err"), "%.1e") + ("!" if r.get("above_tolerance") else "")
            note = r.get("algo") or r.get("note") or ""
            if r.get("error"):
                note = "FAILED: " + r["error"]
            variant = r["variant"] if r.get("pipeline") else "*%s*" % r["variant"]
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


FAMILY_COLOURS = {
    "convred-fused": "#1f77b4",
    "convred-unfused": "#9ecae1",
    "cudnn": "#7f7f7f",
    "pytorch-eager": "#ff7f0e",
    "pytorch-compile": "#d62728",
}


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
        names = [r["variant"] for r in rows]
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
                    help="comma-separated subset of %s (default: all)" % ", ".join(CASE_ORDER))
    ap.add_argument("--iters", type=int, default=30, help="timed runs per variant, median reported (30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (3)")
    ap.add_argument("--samples", type=int, default=512, help="output pixels checked against float64 (512)")
    ap.add_argument("--seed", type=int, default=2026, help="data seed (2026)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
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
              "cases": [dict(c, rows=[r for r in c["rows"] if r.get("source") == "pytorch"]) for c in earlier["cases"]]}
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

    args.cases = [s for s in args.cases.split(",") if s]
    bad = [s for s in args.cases if s not in CASES]
    if bad or not args.cases:
        ap.error("--cases: unknown %s (known: %s)" % (", ".join(bad) or "(none given)", ", ".join(CASE_ORDER)))
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
