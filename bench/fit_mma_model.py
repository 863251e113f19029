#!/usr/bin/env python3
"""Fits the planner's model of the mma.sync kernel (device/cost_model.cuh: plan_conv2d_reduce_seconds and its
constants) to the mma.sync rows of torchvision_sweep.py result files.

    python3 bench/fit_mma_model.py bench/results/h200_2026-12-04_*sweep.json

Each convred row whose kernel description starts with "mma.sync" is a run of the mma.sync kernel, fused
("mma.sync tf32 (256-pixel x 128-channel tiles)") or split ("mma.sync tf32 split A channel tiles x S GEMM_K
splits ..."). A layer seen in several files keeps its fastest time. The model, as plan_conv2d_reduce_seconds computes
it (one resident block per SM on 132 SMs; tf32, bf16: 256 x 128 x 32 tiles, tf32x3: 128 x 128 x 32):

    slice_s = 2 * BM * BN * BK / rate[math]
    fused:  F + ceil(m_tiles / SMs) * (channel_tiles * slices + ovh) * slice_s
    split:  F + Fs + ceil(m_tiles * channel_tiles * S / SMs) * (ceil(slices / S) + ovh) * slice_s
              + S * N*P*Q * K * 4 bytes * 2 / bw

with m_tiles = ceil(N*P*Q / BM), channel_tiles = groups * ceil((K/groups) / BN), slices = ceil(GEMM_K / BK).
Least squares on log(model / measured). Prints the constants, the error and the worst rows.
Needs numpy and scipy (not a dependency of convred itself).
"""
import glob
import json
import math
import re
import sys

import numpy as np
from scipy.optimize import least_squares

SMS = 132
BM = {"tf32": 256, "bf16": 256, "fp16": 256, "tf32x3": 128}
MATHS = ["tf32", "bf16", "tf32x3"]


def rows_of(files):
    best = {}
    for f in files:
        for layer in json.load(open(f))["layers"]:
            for r in layer["rows"]:
                k = r.get("kernel") or ""
                if not k.startswith("mma.sync") or not r.get("ms"):
                    continue
                m = re.match(r"mma\.sync (\w+)( split (\d+) channel tiles x (\d+) GEMM_K splits)?", k)
                math_, splits = m.group(1), int(m.group(4)) if m.group(2) else 0
                if math_ not in MATHS:
                    continue
                key = (layer["name"], math_, splits)
                if key not in best or r["ms"] < best[key][1]:
                    best[key] = (layer, r["ms"] * 1e-3)
    out = []
    for (name, math_, splits), (L, t) in best.items():
        g = L["groups"]
        M = L["N"] * L["P"] * L["Q"]
        gk = L["C"] // g * L["R"] * L["S"]
        out.append(dict(name=name, math=math_, splits=splits, m_tiles=-(-M // BM[math_]),
                        ctiles=g * -(-(L["K"] // g) // 128), slices=-(-gk // 32), plane=M * L["K"] * 4, t=t))
    return out


def model(x, r):
    F, Fs, ovh, inv_bw = x[0], x[1], x[2], x[3]
    rate = x[4 + MATHS.index(r["math"])] * 1e12
    slice_s = 2 * BM[r["math"]] * 128 * 32 / rate
    S = r["splits"]
    if S == 0:
        return F + -(-r["m_tiles"] // SMS) * (r["ctiles"] * r["slices"] + ovh) * slice_s
    waves = -(-(r["m_tiles"] * r["ctiles"] * S) // SMS)
    return F + Fs + waves * (-(-r["slices"] // S) + ovh) * slice_s + S * 2 * r["plane"] * inv_bw * 1e-12


def main():
    files = sys.argv[1:] or sorted(glob.glob("bench/results/h200_*sweep.json"))
    rows = rows_of(files)
    if not rows:
        sys.exit("fit_mma_model: no mma.sync rows in " + " ".join(files))
    res = lambda x: [math.log(model(x, r) / r["t"]) for r in rows]
    x0 = [8e-6, 4e-6, 2, 0.33, 0.7, 0.8, 0.3]
    fit = least_squares(res, x0, bounds=([0, 0, 0, 0.05, 0.1, 0.1, 0.05], [50e-6, 50e-6, 20, 5, 3, 3, 3]))
    x = fit.x
    e = np.array(res(x))
    print(f"{len(rows)} runs of the mma.sync kernel from {len(files)} files")
    print(f"plan_mma_fixed_seconds       {x[0] * 1e6:.1f} us")
    print(f"plan_mma_split_fixed_seconds {x[1] * 1e6:.1f} us")
    print(f"plan_mma_overhead_slices     {x[2]:.2f}")
    print(f"plan_mma_partial_bytes_per_s {1 / x[3]:.2f} TB/s")
    print("plan_mma_flops_per_sm        " + ", ".join(f"{m} {x[4 + i]:.2f}e12" for i, m in enumerate(MATHS)))
    print(f"error: rms {np.sqrt((e ** 2).mean()):.3f}, max {abs(e).max():.3f} (natural log of model / measured)")
    for r, err in sorted(zip(rows, e), key=lambda z: -abs(z[1]))[:10]:
        print(f"  {r['name']:<40} {r['math']:<6} splits {r['splits']:3d}  measured {r['t'] * 1e6:9.1f} us"
              f"  model {model(x, r) * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
