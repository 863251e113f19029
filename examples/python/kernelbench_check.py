"""KernelBench's correctness protocol and timing for the seed model, for each convred math.

Correctness (as KernelBench's eval): reference = Model in PyTorch's default mode (cuDNN conv with TF32,
torch.backends.cudnn.allow_tf32 = True), inputs torch.rand, seed 42, 5 trials, each passing only if
torch.allclose(out, ref, atol=1e-4, rtol=1e-4). Timing: CUDA events, L2 flushed (256 MB written) before
each trial, 100 trials after 3 warm-ups, mean in ms; against eager and torch.compile (default mode).
Also printed: each output's error against a float64 computation of the same model (trial 0), which
tells "less accurate" from "more accurate than the TF32 reference" (README, section Python).

    python examples/python/kernelbench_check.py [--maths tf32,fp16,...] [--trials 100] [--batch 64]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_model as sm  # noqa: E402

ATOL = RTOL = 1e-4


def flush_l2(buf):
    buf.zero_()


def time_ms(fn, x, trials, warmup=3):
    buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            flush_l2(buf)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maths", default="tf32,fp16,bf16,tf32x3,accurate,ieee")
    ap.add_argument("--trials", type=int, default=100, help="timing trials (KernelBench: 100)")
    ap.add_argument("--correct-trials", type=int, default=5, help="correctness trials (KernelBench: 5)")
    ap.add_argument("--batch", type=int, default=sm.batch_size)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile timing")
    ap.add_argument("--smoke-cpu", action="store_true",
                    help="check this script's logic on the CPU (CPU reference kernel, 2 x 64 x 32 x 32, no timing)")
    a = ap.parse_args()
    sm.batch_size = a.batch
    if a.smoke_cpu:
        dev = torch.device("cpu")
        sm.batch_size, sm.height, sm.width = 2, 32, 32
    elif not torch.cuda.is_available():
        print("kernelbench_check: no CUDA device")
        return 2
    else:
        dev = torch.device("cuda")
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convolutions: the reference is TF32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(42)
    ref_model = sm.Model(*sm.get_init_inputs()).to(dev).eval()
    maths = [m for m in a.maths.split(",") if m]
    news = {m: sm.ModelNew.from_model(ref_model, math=m).eval() for m in maths}
    name = "cpu" if a.smoke_cpu else torch.cuda.get_device_name()
    print(f"device: {name}; torch {torch.__version__}; x "
          f"({sm.batch_size}, {sm.in_channels}, {sm.height}, {sm.width}) fp32 NCHW")
    for m, model in news.items():
        x0 = torch.rand(2, sm.in_channels, 16, 16, device=dev)
        print(f"  ModelNew math={m:7s} kernel: {model.conv.kernel_for(x0)}")

    # --- correctness (KernelBench protocol)
    torch.manual_seed(42)
    seeds = [torch.randint(0, 2**31 - 1, (1,)).item() for _ in range(a.correct_trials)]
    ok = {m: 0 for m in maths}
    max_diff = {m: 0.0 for m in maths}
    err64 = {}
    with torch.no_grad():
        for t, s in enumerate(seeds):
            torch.manual_seed(s)
            x = sm.get_inputs()[0].to(dev)
            ref = ref_model(x)
            if t == 0:
                w, b = ref_model.conv.weight.double(), ref_model.conv.bias.double()
                exact = torch.cat([torch.min(torch.nn.functional.conv2d(x[i:i + 8].double(), w, b) * sm.scale_factor,
                                             1, keepdim=True)[0] for i in range(0, x.shape[0], 8)])
                err64["pytorch-default(tf32)"] = ((ref.double() - exact).norm() / exact.norm()).item()
            for m, model in news.items():
                out = model(x)
                d = (out - ref).abs().max().item()
                max_diff[m] = max(max_diff[m], d)
                ok[m] += bool(torch.allclose(out, ref, atol=ATOL, rtol=RTOL))
                if t == 0:
                    err64[m] = ((out.double() - exact).norm() / exact.norm()).item()
            del x, ref
    print(f"\ncorrectness: {a.correct_trials} trials, torch.allclose(atol={ATOL}, rtol={RTOL}) vs PyTorch default "
          f"(TF32 conv); error = ||out - float64|| / ||float64|| (trial 0)")
    print(f"  {'reference (PyTorch default)':30s} error vs float64 {err64['pytorch-default(tf32)']:.2e}")
    for m in maths:
        verdict = "PASS" if ok[m] == a.correct_trials else "FAIL"
        print(f"  convred math={m:7s} {verdict} ({ok[m]}/{a.correct_trials})  max|diff| {max_diff[m]:.2e}  "
              f"error vs float64 {err64[m]:.2e}")

    passed = [m for m in maths if ok[m] == a.correct_trials]
    if a.smoke_cpu:
        print(f"\nKernelBench-correct maths: {', '.join(passed) if passed else 'none'} (CPU smoke run, no timing)")
        return 0

    # --- timing
    torch.manual_seed(42)
    x = sm.get_inputs()[0].to(dev)
    rows = [("eager (PyTorch default, TF32)", time_ms(ref_model, x, a.trials))]
    if not a.no_compile:
        compiled = torch.compile(ref_model)
        rows.append(("torch.compile (default)", time_ms(compiled, x, a.trials)))
    for m, model in news.items():
        rows.append((f"convred {m}", time_ms(model, x, a.trials)))
    eager = rows[0][1]
    comp = rows[1][1] if not a.no_compile else None
    print(f"\ntiming: CUDA events, L2 flushed, mean of {a.trials} trials")
    for name, ms in rows:
        extra = f"  speedup vs eager {eager / ms:.2f}x"
        if comp:
            extra += f", vs torch.compile {comp / ms:.2f}x"
        print(f"  {name:32s} {ms:8.3f} ms{extra}")
    print(f"\nKernelBench-correct maths: {', '.join(passed) if passed else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
