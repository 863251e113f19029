#!/usr/bin/env python3
"""Winograd F(2x2, 3x3) on Hopper, step 1 "measure first" (issue 29): an arithmetic model and an accuracy
simulation, no kernel and no GPU.

    y = min over k of 2 * (b[k] + conv2d(x, W)[n, k, p, q])      (3x3, stride 1, groups 1)

Parts (--parts, comma-separated; default all):
  rates     the H200 rates the model uses and where each comes from
  work      GEMM multiply-adds direct vs F(2x2,3x3), the three transforms' operation counts, as CUDA-core
            instructions per 2x2 tile and as a share of the tensor time
  regs      the 16 batched GEMMs on wgmma: shapes, accumulator registers per consumer thread for the
            tilings that come into question, and their shared-memory operand traffic
  smem      shared-memory and L2 bytes per stage, stages that fit in 227 KB, bytes per multiply-add
  time      per-unit cycle model (max of tensor, shared memory, producer, L2 per stage, plus the epilogue)
            for the current direct kernel (checked against its measured times) and for the Winograd
            designs, on the seed and the suite's 3x3 stride-1 layers
  accuracy  F(2x2,3x3) and direct convolution in fp32, tf32 (round to nearest even; truncated), bf16 and
            3xTF32 against float64 on seed-like data (numpy, one thread)
  micro     the microbenchmarks that should check the model first, with the numbers it expects

The model works in SM clock cycles per work unit (one persistent block per SM, units in waves) and converts
with the clock the H200 runs at under this load (1.78 GHz: bench/NOTES.md, session 5's per-tile clock counts
and session 13's ncu 1.79 GHz). Per SM and clock (Hopper, sm_90): dense TF32 1,024 multiply-adds (one
m64n128k8 wgmma in 64 cycles, confirmed by ncu in bench/NOTES.md session 13), BF16/FP16 2,048; 128 FP32
lanes (FFMA/FADD), 4 warp instructions issued; shared memory 128 B (32 banks x 4 B; the same figure the
project's earlier model of the direct kernel uses: bench/NOTES.md, "What bounds v2b"); register file 64 K x
32 bit. --smem-bw changes the shared-memory rate (the model's decisive and least certain input).

Usage (CPU only, ~3 s with the accuracy part on one core; one BLAS thread):
    python bench/winograd_model.py                     # everything, markdown tables on stdout
    python bench/winograd_model.py --parts time --smem-bw 256
    python bench/winograd_model.py --parts accuracy --images 2 --size 64 --json out.json
Needs numpy (the accuracy part also reads nothing else). Measured times of the direct kernel for the
calibrated columns come from --results (default bench/results/h200_2026-12-03_families.json) if present.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # keep the CPU light: one BLAS thread

import argparse
import json
import math
import sys
import time

import numpy as np

# ----------------------------------------------------------------------------------------------------------
# Rates (per SM per clock unless said otherwise)
# ----------------------------------------------------------------------------------------------------------
HW = {
    "sms": 132,
    "clk_ghz": 1.78,  # under this load: NOTES session 5 (clock64 per tile vs ms), session 13 ncu 1.79 GHz
    "mac_per_clk": {"tf32": 1024, "bf16": 2048},  # dense, per SM (wgmma m64n128k8 tf32 = 64 cycles)
    "k_per_wgmma": {"tf32": 8, "bf16": 16},
    "elem_bytes": {"tf32": 4, "bf16": 2},
    "fp32_lanes": 128,  # FFMA/FADD per clock per SM
    "issue_per_clk": 4 * 32,  # thread instructions per clock per SM (4 schedulers x 1 warp instruction)
    "smem_B_per_clk": 128.0,  # shared memory (--smem-bw)
    "smem_bytes": 232448,  # 227 KB: the most dynamic shared memory one block can opt in to on sm_90
    "regs": 65536,
    "l2_distinct_B_per_clk": 37.0,  # bulk copies, every SM its own data (NOTES session 12)
    "l2_shared_B_per_clk": 75.0,  # bulk copies, the same data on every SM (NOTES session 12: the filter)
    "hbm_TBps": 4.18,  # device copy, measured
    # rates in TFLOP/s for the whole-problem view
    "cublas_tflops": {"tf32": 394.0, "bf16": 756.0},  # measured on the card (docs/performance.md)
    "datasheet_tflops": {"tf32": 495.0, "bf16": 989.0, "fp32": 67.0},  # H200 SXM dense
    "ffma_measured_tflops": 50.5,
}

# measured epilogue of the direct kernel per 256-pixel tile and 128 channels (bench/NOTES.md, session 5
# clock table: epilogue math 2,636 / 2,502-2,634 cycles, reduce + store 1,325 / 1,300)
EPI_FOLD = {"tf32": 2636.0, "bf16": 2600.0}  # per 128 channels of a 256-pixel tile
EPI_FINISH = {"tf32": 1325.0, "bf16": 1300.0}  # per 256-pixel tile

SEED = dict(name="seed", N=64, C=64, H=256, W=256, K=128, pad=0)

# the suite's 3x3 stride-1 groups-1 layers (bench/conv_reduce_bench.cu kSuite), the training batch and batch 1
SUITE_33 = [
    ("resnet50.layer1.0.conv2", 32, 64, 56, 56, 64, 1),
    ("resnet50.layer2.1.conv2", 32, 128, 28, 28, 128, 1),
    ("resnet50.layer3.1.conv2", 32, 256, 14, 14, 256, 1),
    ("resnet50.layer4.1.conv2", 32, 512, 7, 7, 512, 1),
    ("vgg16.conv1_2", 32, 64, 224, 224, 64, 1),
    ("vgg16.conv3_2", 32, 256, 56, 56, 256, 1),
    ("unet.enc1", 16, 64, 256, 256, 64, 1),
    ("unet.bottleneck", 32, 512, 32, 32, 1024, 1),
    ("seed", 64, 64, 256, 256, 128, 0),
]


def suite_layers():
    out = []
    for name, nb, C, H, W, K, pad in SUITE_33:
        for n in (nb, 1):
            out.append(dict(name=f"{name}.n{n}", N=n, C=C, H=H, W=W, K=K, pad=pad))
    return out


def PQ(L):
    return L["H"] + 2 * L["pad"] - 2, L["W"] + 2 * L["pad"] - 2


def cdiv(a, b):
    return -(-a // b)


def r8(n):
    return cdiv(n, 8) * 8


# ----------------------------------------------------------------------------------------------------------
# 1. Work
# ----------------------------------------------------------------------------------------------------------
# Input transform B^T d B of a 4x4 tile: 4 adds per 4-vector (d0-d2, d1+d2, d2-d1, d1-d3), 4 columns then 4
# rows: 32 adds (24 when a thread walks a strip of tiles and keeps the column transforms of the 2 shared
# columns). Filter transform G g G^T: per 3-vector t=g0+g2, (t+g1)/2, (t-g1)/2: 3 adds, 2 multiplies; 3
# columns then 4 rows: 21 adds + 14 multiplies per (k, c), once. Output transform A^T M A: per 4-vector
# m0+m1+m2, m1-m2-m3 = 4 adds; 4 columns then 2 rows: 24 adds per (tile, k).
IN_ADDS, IN_ADDS_STRIP, OUT_ADDS, FILT_OPS = 32, 24, 24, 35
# CUDA-core instructions per (tile, input channel) of the producer's input transform (one thread does 4
# (tf32) or 8 (bf16) channels of a tile: 4 LDS.128 rows of the raw 4x4 window per channel, the adds, the
# conversion (tf32: one cvt.rn per value; bf16: one F2FP per pair), 16 xi values stored as 16-byte channel
# chunks (tf32: 4 channels per STS.128 -> 4 per (tile, c); bf16: 8 channels -> 2), ~4 address/loop)
IN_INSTR = {
    "tf32": dict(lds=4, fadd=IN_ADDS, cvt=16, sts=4, other=4),
    "bf16": dict(lds=4, fadd=IN_ADDS, cvt=8, sts=2, other=4),
}
# per (tile, output channel) in the consumer: output transform (24 adds; the two consumer warpgroups hold 8
# xi each, so 12 + 12 adds, 2 + 2 partial sums exchanged through shared memory: 4 STS + 4 LDS, 4 adds to
# combine) and the epilogue (4 outputs x (FFMA bias/scale + FMNMX fold))
OUT_INSTR = dict(fadd=OUT_ADDS + 4, mem=8)
EPI_INSTR = 8


def work_numbers(L, prec="tf32"):
    P, Q = PQ(L)
    N, C, K = L["N"], L["C"], L["K"]
    tiles = N * cdiv(P, 2) * cdiv(Q, 2)
    direct = N * P * Q * K * C * 9
    wino = tiles * 16 * C * K
    rate = HW["mac_per_clk"][prec]
    # per 2x2 tile (all C and K): tensor cycles of one SM, CUDA-core instruction issue cycles
    t_tensor = 16 * C * K / rate
    ii = IN_INSTR[prec]
    in_instr = C * sum(ii.values())
    out_instr = K * (OUT_INSTR["fadd"] + OUT_INSTR["mem"])
    epi_instr = K * EPI_INSTR
    issue = HW["issue_per_clk"]
    return dict(
        P=P, Q=Q, tiles=tiles, direct_mac=direct, wino_mac=wino, ratio=direct / wino,
        direct_gflop=2 * direct / 1e9, wino_gflop=2 * wino / 1e9,
        in_adds=tiles * C * IN_ADDS, out_adds=tiles * K * OUT_ADDS, filt_ops=K * C * FILT_OPS,
        tile_tensor_cyc=t_tensor, tile_in_instr=in_instr, tile_out_instr=out_instr, tile_epi_instr=epi_instr,
        tile_in_cyc=in_instr / issue, tile_out_cyc=out_instr / issue, tile_epi_cyc=epi_instr / issue,
        tile_in_fadd_cyc=C * IN_ADDS / HW["fp32_lanes"], tile_out_fadd_cyc=K * OUT_ADDS / HW["fp32_lanes"],
    )


def part_work(out, res):
    w = work_numbers(SEED, "tf32")
    wb = work_numbers(SEED, "bf16")
    fadd_rate_ds = HW["datasheet_tflops"]["fp32"] / 2 * 1e12  # FADD/s: one per FMA slot
    fadd_rate_ms = HW["ffma_measured_tflops"] / 2 * 1e12
    t_t = w["wino_gflop"] * 1e9 / (HW["cublas_tflops"]["tf32"] * 1e12) * 1e3
    t_b = w["wino_gflop"] * 1e9 / (HW["cublas_tflops"]["bf16"] * 1e12) * 1e3
    out(f"### 1. Work (seed: x (64,64,256,256), K = 128, 3x3, no padding: {w['P']}x{w['Q']} outputs, "
        f"{w['tiles']:,} 2x2 tiles)\n")
    out("| quantity | direct | F(2x2,3x3) |")
    out("|---|---:|---:|")
    out(f"| GEMM multiply-adds | {w['direct_mac']/1e9:.1f} G ({w['direct_gflop']:.1f} GFLOP) | "
        f"{w['wino_mac']/1e9:.1f} G ({w['wino_gflop']:.1f} GFLOP): {w['ratio']:.2f}x fewer |")
    out(f"| tensor time at cuBLAS's measured TF32 394 / BF16 756 TFLOP/s | "
        f"{w['direct_gflop']/394:.2f} / {w['direct_gflop']/756:.2f} ms | {t_t:.3f} / {t_b:.3f} ms |")
    for label, n, per in (("input transform B^T d B (adds, once per (tile, c))", w["in_adds"], "32 per (tile, c)"),
                          ("output transform A^T M A (adds, per (tile, k))", w["out_adds"], "24 per (tile, k)")):
        ds, ms = n / fadd_rate_ds * 1e3, n / fadd_rate_ms * 1e3
        out(f"| {label} | - | {n/1e9:.2f} G = {ds:.3f} ms at 67 TFLOP/s FFMA-rate, {ms:.3f} at 50.5 "
            f"({100*ms/t_t:.0f}% of the TF32 tensor time, {100*ms/t_b:.0f}% of BF16's) |")
    out(f"| filter transform G g G^T (once, in pack_filter) | - | {w['filt_ops']:,} operations (21 adds + 14 "
        f"multiplies per (k, c)): negligible |")
    out("")
    out("Per 2x2 tile, all 64 input and 128 output channels, in one SM's clocks (tensor: 16*C*K multiply-adds "
        "at 1,024 (tf32) / 2,048 (bf16) per clock; CUDA-core work as issue slots at 128 thread instructions "
        "per clock, the most the SM's 4 schedulers issue):\n")
    out("| per tile | instructions (thread) | issue cycles | share of tf32 tensor | share of bf16 tensor |")
    out("|---|---:|---:|---:|---:|")
    out(f"| tensor (16 GEMM slices) | - | {w['tile_tensor_cyc']:.0f} (tf32) / {wb['tile_tensor_cyc']:.0f} (bf16) | 100% | 100% |")
    rows = [
        ("input transform, once (tf32: 4 LDS + 32 FADD + 16 CVT + 4 STS + 4 per channel)", w["tile_in_instr"], w["tile_in_cyc"], wb["tile_in_instr"], wb["tile_in_cyc"]),
        ("output transform + exchange (28 FADD + 8 LDS/STS per channel)", w["tile_out_instr"], w["tile_out_cyc"], wb["tile_out_instr"], wb["tile_out_cyc"]),
        ("epilogue (bias*scale FFMA + min, 4 outputs per channel)", w["tile_epi_instr"], w["tile_epi_cyc"], wb["tile_epi_instr"], wb["tile_epi_cyc"]),
    ]
    tot_t = tot_b = 0.0
    for label, it, ct, ib, cb in rows:
        tot_t += ct
        tot_b += cb
        out(f"| {label} | {it:,} (bf16 {ib:,}) | {ct:.1f} (bf16 {cb:.1f}) | {100*ct/w['tile_tensor_cyc']:.0f}% | "
            f"{100*cb/wb['tile_tensor_cyc']:.0f}% |")
    out(f"| all CUDA-core work, perfect issue | | {tot_t:.1f} / {tot_b:.1f} | {100*tot_t/w['tile_tensor_cyc']:.0f}% | "
        f"{100*tot_b/wb['tile_tensor_cyc']:.0f}% |")
    # the direct kernel for comparison: per 4 outputs
    d_tensor = 4 * 9 * 64 * 128 / 1024
    d_conv = 4 * (6 * 66 / 256) * 64 * 2.1  # producer's conversion: ~1.55 raw values per output, ~2.1 instr each
    d_instr = d_conv + 128 * EPI_INSTR
    out(f"| direct kernel, same 4 outputs: conversion + epilogue | {d_instr:,.0f} | {d_instr/HW['issue_per_clk']:.1f} | "
        f"{100*d_instr/HW['issue_per_clk']/d_tensor:.0f}% of its {d_tensor:.0f} tf32 tensor cycles | |")
    out("")
    out(f"Each (tile, c) transform feeds 16*N multiply-adds of one channel pass of N output channels: made "
        f"once for all K = 128 the input transform is {100*w['tile_in_cyc']/w['tile_tensor_cyc']:.0f}% of the "
        f"tf32 tensor time in issue slots; remade in each of K/N = 4 passes of N = 32 it is "
        f"{400*w['tile_in_cyc']/w['tile_tensor_cyc']:.0f}% (bf16 {400*wb['tile_in_cyc']/wb['tile_tensor_cyc']:.0f}%).\n")
    res["work"] = dict(seed_tf32=w, seed_bf16=wb)


# ----------------------------------------------------------------------------------------------------------
# 2. GEMM mapping and registers
# ----------------------------------------------------------------------------------------------------------
def smem_operand_ratio(n_wgmma, m=64):
    """Shared-memory cycles / tensor cycles of a stream of SS wgmmas m64 x n x k: A (m x k) and B (n x k)
    read once per instruction (B broadcast to the 4 warps' tensor cores). Same for tf32 and bf16 (half the
    bytes, twice the rate)."""
    return 1024 * 4 * (1.0 / n_wgmma + 1.0 / m) / HW["smem_B_per_clk"]


def rs_b_ratio(n_wgmma, m=64):
    return 1024 * 4 * (1.0 / m) / HW["smem_B_per_clk"]


def part_regs(out, res):
    out("### 2. The 16 batched GEMMs on wgmma, and the registers\n")
    out("For each of the 16 transformed positions xi = (i, j): M_xi[T x K] = V_xi[T x C] * U_xi[C x K] "
        "(T tiles, V the transformed input, U the transformed filter). wgmma shapes: A = V_xi rows of 64 tiles, "
        "B = U_xi (N output channels, 8..256 in steps of 8), k = 8 channels (tf32, `m64nNk8`) or 16 (bf16, "
        "`m64nNk16`); tf32 operands in shared memory must be K-major (channels innermost: the 16-byte channel "
        "chunks the current planes already use). Each consumer thread holds the same (tile, channel) "
        "positions of all its xi, so the output transform is in-thread: 16 accumulators per (tile, channel) "
        "when one warpgroup holds all 16 xi.\n")
    out("Accumulator registers per consumer thread = xi_per_wg * T_wg * N / 128 (fp32). Budget: 216 per "
        "consumer thread with one producer warpgroup at 72 (the current setmaxnreg split; 184 with two "
        "producer warpgroups); ~24-40 of them go to descriptors, barriers, pointers and the epilogue's state, "
        "so ~176-190 for accumulators. 255 is the per-thread ceiling, reachable only with a 24-register "
        "producer that cannot transform (2*128*240 + 128*24 = 64,512).\n")
    out("SMEM/tensor = shared-memory cycles per tensor cycle of the wgmma operand reads alone at "
        f"{HW['smem_B_per_clk']:.0f} B/clk: 32*(1/N + 1/64) for SS (A and B both read per instruction), "
        "0.5 for RS (B only; A from registers, which then have to be filled).\n")
    out("| layout | xi per WG | T (tiles per unit) | N | mode | acc regs / thread | + RS A fragments (x2 buffers) | fits 216? | SMEM/tensor (operands) |")
    out("|---|---:|---:|---:|---|---:|---:|---|---:|")
    rows = []
    for layout, xi_wg, T, t_wg_fn, n_wg_fn in (
        ("WGs split xi (8 + 8), same 64 tiles and N channels", 8, 64, lambda T: 64, lambda N: N),
        ("WGs split tiles (64 + 64), all 16 xi", 16, 128, lambda T: 64, lambda N: N),
        ("WGs split channels (N/2 + N/2), all 16 xi", 16, 64, lambda T: 64, lambda N: N // 2),
        ("one WG 128 tiles (2 x m64), all 16 xi", 16, 128, lambda T: 128, lambda N: N),
    ):
        for N in (8, 16, 24, 32, 48, 64, 128):
            nw = n_wg_fn(N)
            if nw < 8:
                continue
            acc = xi_wg * t_wg_fn(T) * nw / 128
            for mode in ("SS", "RS"):
                frag = 0 if mode == "SS" else xi_wg * 4 * 2 * (t_wg_fn(T) // 64)
                tot = acc + frag
                fits = "yes" if tot <= 176 else ("tight" if tot <= 200 else "no")
                ratio = smem_operand_ratio(nw) if mode == "SS" else rs_b_ratio(nw)
                rows.append((layout, xi_wg, T, N, mode, acc, frag, fits, ratio))
    for layout, xi_wg, T, N, mode, acc, frag, fits, ratio in rows:
        if acc > 256:
            continue
        out(f"| {layout} | {xi_wg} | {T} | {N} | {mode} | {acc:.0f} | {frag if mode=='RS' else '-'} | {fits} | {ratio:.2f} |")
    out("")
    out("N = 128 per channel pass (all of the seed's K at once) would need 16 x 64 x 128 / 256 = 512 accumulator "
        "registers per consumer thread for T = 64 (1,024 for T = 128): twice the register file.\n")
    out("Reading: the whole register file (65,536 x 4 B) holds 16 x 64 x 64 fp32 accumulators, so 16 xi of a "
        "64-tile block reach at most N = 48 (192 registers per thread with the xi split across the two "
        "warpgroups). The direct kernel's 9 taps share one set of accumulators (N = 128 at 128 registers); "
        "Winograd's 16 products per tile each need their own, which cuts N four-fold for the same registers. "
        "SS operand reads then cost 32/N + 0.5 shared-memory cycles per tensor cycle: 1.5 at N = 32, 1.17 at "
        "N = 48, against 0.75 for the direct kernel's m64n128. RS does not help: the A fragments must come "
        "from somewhere, and the transformed input (or the raw 4x4 windows it is made from) is read from "
        "shared memory with the same bytes per multiply-add (4/N), plus 64 (xi split) to 128 registers of "
        "double-buffered fragments. SS with the producer writing V is the better of the two; both lose to "
        "the register file.\n")
    res["regs"] = [dict(layout=r[0], xi_wg=r[1], T=r[2], N=r[3], mode=r[4], acc=r[5], frag=r[6], fits=r[7],
                        smem_ratio=r[8]) for r in rows]


# ----------------------------------------------------------------------------------------------------------
# 3/4. Per-stage bytes and the time model
# ----------------------------------------------------------------------------------------------------------
def direct_unit(L, prec, smem_bw):
    """The current packed wgmma kernel (cooperative, 4 x 64 pixel tile, N = 128 channel passes)."""
    C, K = L["C"], L["K"]
    e, bc = HW["elem_bytes"][prec], HW["k_per_wgmma"][prec]
    stages, passes = cdiv(C, bc), cdiv(K, 128)
    raw = 6 * 68 * bc * 4  # fp32 TMA boxes (68 = 66 rounded for 16-byte rows)
    planes = 6 * 66 * bc * e
    filt_slice = 9 * 128 * bc * e
    resident_total = 9 * stages * bc * 128 * passes * e
    resident = (resident_total + 4 * planes + 2 * 6 * 68 * 8 * 4 + 1024 <= HW["smem_bytes"]) and resident_total < (1 << 20)
    by = dict(wgmma=36 * (64 + 128) * bc * e, raw_tma=raw, raw_read=raw, v_write=planes,
              u_tma=0 if resident else filt_slice, exch=0)
    tensor = 36 * 64 * bc * 128 / HW["mac_per_clk"][prec]  # 2,304
    smem_cyc = sum(by.values()) / smem_bw
    l2 = raw / HW["l2_distinct_B_per_clk"] + (0 if resident else filt_slice / HW["l2_shared_B_per_clk"])
    prod = 6 * 68 * bc * 2.1 / 96.0  # ideal issue of ~2.1 instructions per raw value, 3 producer warps
    stage = max(tensor, smem_cyc, l2, prod)
    main = passes * stages * stage
    epi = EPI_FOLD[prec] * min(K, 128 * passes) / 128 + EPI_FINISH[prec]
    return dict(unit_out=256, stage_bytes=by, stage_tensor=tensor, stage_smem=smem_cyc, stage_l2=l2,
                stage_prod=prod, stage=stage, main=main, epi=epi, total=main + epi, resident=resident,
                smem_per_mac=sum(by.values()) / (36 * 64 * 128 * bc))


def f22_unit(L, prec, smem_bw, N=32, raw_mode="tma", v_mode="ss", count_v=True, count_u=True, count_exch=True,
             epi_ipc=0.5, prod_warps=None, v_once=False, xi_split=True):
    """F(2x2,3x3), 64 tiles (4 x 64 outputs) per unit, the two consumer warpgroups splitting the 16 xi (8 + 8),
    K in passes of N channels, the transformed input made again in each pass (it does not fit in shared
    memory for the whole unit: 16*64*C*e bytes). v_mode "ss": the producer writes V, wgmma reads both
    operands from shared memory; "rs": each consumer warpgroup transforms its 8 xi from the raw windows into
    registers (A from registers). raw_mode "tma": raw x lands by TMA and is read back (the current producer);
    "ldg": the producer loads x into registers (no raw bytes in shared memory). v_once: V of the whole unit
    stays in shared memory across the passes (made in the first pass only; fits for bf16 with C <= 64).
    xi_split False: each warpgroup holds all 16 xi of its own unit (ping-pong; no exchange)."""
    C, K = L["C"], L["K"]
    e, bc = HW["elem_bytes"][prec], HW["k_per_wgmma"][prec]
    rate = HW["mac_per_clk"][prec]
    stages = cdiv(C, bc)
    if prod_warps is None:
        prod_warps = 3 if prec == "tf32" else 7
    passes, rem, main = [], K, 0.0
    while rem > 0:
        n = min(N, r8(rem))
        passes.append(n)
        rem -= n
    detail = None
    instr_tc = sum(IN_INSTR[prec].values())
    for pi, n in enumerate(passes):
        make_v = count_v and (pi == 0 or not v_once)
        tensor = 16 * 64 * bc * n / rate
        raw = 6 * 68 * bc * 4
        by = dict(wgmma=0, raw_tma=0, raw_read=0, v_write=0, u_tma=0, exch=0)
        if v_mode == "ss":
            by["wgmma"] = 16 * bc * e * (64 + n)
            by["v_write"] = 16 * 64 * bc * e if make_v else 0
            if raw_mode == "tma" and make_v:
                by["raw_tma"], by["raw_read"] = raw, 2 * raw  # 4x4 windows read as LDS.128 rows: 2x overlap
        else:  # rs: B only from shared memory; both warpgroups read the raw windows (12 values per tile and c
            by["wgmma"] = 16 * bc * e * n  # with a vertical tile pair per thread)
            if raw_mode == "tma":
                by["raw_tma"], by["raw_read"] = raw, 2 * 64 * bc * 12 * 4
        by["u_tma"] = 16 * bc * n * e if count_u else 0
        by["exch"] = (2048 * n / stages) if count_exch else 0  # 32 B per (tile, k) per pass, spread over stages
        smem_cyc = sum(by.values()) / smem_bw
        l2 = (raw / HW["l2_distinct_B_per_clk"] if make_v else 0) + (by["u_tma"] / HW["l2_shared_B_per_clk"])
        if v_mode == "ss":
            prod = (64 * bc * instr_tc / min(32 * prod_warps, HW["issue_per_clk"])) if make_v else 0
        else:  # the consumers transform: 2 WGs x 64 tiles x bc x (24 adds + cvt/2 + 3 LDS + 2)
            prod = 2 * 64 * bc * (24 + IN_INSTR[prec]["cvt"] / 2 + 3 + 2) / HW["issue_per_clk"]
        stage = max(tensor, smem_cyc, l2, prod)
        main += stages * stage
        if detail is None:
            detail = dict(N=n, stage_bytes=by, stage_tensor=tensor, stage_smem=smem_cyc, stage_l2=l2, stage_prod=prod,
                          stage=stage, smem_per_mac=sum(by.values()) / (16 * 64 * bc * n))
    # epilogue: the direct kernel's measured fold + finish per output channel, plus the output transform and
    # the exchange between the warpgroups: per thread 64 tiles * K * (28 FADD + 8 LDS/STS) / 256 threads,
    # 2 warps per scheduler, at epi_ipc warp instructions per clock
    epi_base = EPI_FOLD[prec] * K / 128 + EPI_FINISH[prec]
    per_tk = (OUT_INSTR["fadd"] + OUT_INSTR["mem"]) if xi_split else OUT_ADDS
    t_instr = 64 * K * per_tk / 256
    epi_tr = t_instr * 2 / epi_ipc
    epi = epi_base + epi_tr
    regs = (8 if xi_split else 16) * 64 * N / 128 + (0 if v_mode == "ss" else 64)
    return dict(unit_out=256, passes=passes, main=main, epi=epi, epi_base=epi_base, epi_transform=epi_tr,
                total=main + epi, regs=regs, **detail)


def f12_unit(L, prec, smem_bw, epi_ipc=0.5):
    """F(1x2,3x3) (1-D F(2,3) along rows, the 3 filter rows as taps with shifted descriptors as today):
    units of 2 output rows x 64 columns (64 pairs = one m64), the two warpgroups splitting the 4 transformed
    column positions j (2 + 2), N = 128 (2 x 64 x 128 / 128 = 128 accumulators per thread), one pass per 128
    channels; U = 12 C K e bytes streamed."""
    C, K = L["C"], L["K"]
    e, bc = HW["elem_bytes"][prec], HW["k_per_wgmma"][prec]
    stages, passes = cdiv(C, bc), cdiv(K, 128)
    raw = 4 * 68 * bc * 4
    by = dict(wgmma=12 * (64 + 128) * bc * e, raw_tma=raw, raw_read=2 * raw, v_write=4 * 4 * 32 * bc * e,
              u_tma=12 * bc * 128 * e, exch=2 * 2 * 64 * 128 * 4 / stages)
    tensor = 12 * 64 * 128 * bc / HW["mac_per_clk"][prec]
    smem_cyc = sum(by.values()) / smem_bw
    l2 = raw / HW["l2_distinct_B_per_clk"] + by["u_tma"] / HW["l2_shared_B_per_clk"]
    prod = 4 * 32 * bc * 4 * 2.5 / min(32 * (3 if prec == "tf32" else 7), 128)  # ~10 instr per (window, c)
    stage = max(tensor, smem_cyc, l2, prod)
    main = passes * stages * stage
    epi_base = (EPI_FOLD[prec] * min(K, 128 * passes) / 128 + EPI_FINISH[prec]) / 2  # 128 outputs
    t_instr = 64 * K * (4 + 2 + 4) / 256  # 4 adds, 2 combine adds... and 4 exchange LDS/STS per (pair, k)
    epi = epi_base + t_instr * 2 / epi_ipc
    return dict(unit_out=128, main=main, epi=epi, total=main + epi, stage_bytes=by, stage_tensor=tensor,
                stage_smem=smem_cyc, stage_l2=l2, stage_prod=prod, stage=stage,
                smem_per_mac=sum(by.values()) / (12 * 64 * 128 * bc))


def units_and_waves(L, unit_out, rows_per_unit):
    """Units of rows_per_unit output rows x 64 columns (images at least 64 wide), else flat units of
    unit_out outputs over the batch (2x2 tiles counted whole for the Winograd units)."""
    P, Q = PQ(L)
    N = L["N"]
    if Q >= 62:
        u = N * cdiv(P, rows_per_unit) * cdiv(Q, 64)
    else:
        u = cdiv(N * P * Q, unit_out)
    return u, cdiv(u, HW["sms"])


def wino_units(L, unit_out, rows_per_unit, tile_rows):
    P, Q = PQ(L)
    N = L["N"]
    if Q >= 62:
        u = N * cdiv(cdiv(P, tile_rows) * tile_rows, rows_per_unit) * cdiv(Q, 64)
    else:
        u = cdiv(N * cdiv(P, tile_rows) * tile_rows * cdiv(Q, 2) * 2, unit_out)
    return u, cdiv(u, HW["sms"])


DESIGNS = [
    # key, label
    ("direct", "direct (today's kernel, model)"),
    ("w32", "F(2x2) SS, xi split, N=32, V remade per pass"),
    ("w48", "F(2x2) SS, xi split, N=48 (192 regs), x by LDG (no raw smem bytes)"),
    ("wrs", "F(2x2) RS, consumers transform, xi split, N=32"),
    ("wres", "F(2x2) SS, xi split, N=32, V resident across passes (bf16, C <= 64 only)"),
    ("wlb", "F(2x2) bound: N=48, only wgmma operand bytes in smem"),
    ("wlb_ov", "F(2x2) bound as above, epilogue fully overlapped"),
    ("wpp", "F(2x2) ping-pong bound: each WG its own unit, 16 xi, N=24 (192 regs), only operand bytes, epilogue overlapped"),
    ("f12", "F(1x2,3x3) SS, j split, N=128, 2-row units"),
]


def design_unit(key, L, prec, smem_bw):
    if key == "direct":
        return direct_unit(L, prec, smem_bw), 4, 1
    if key == "w32":
        return f22_unit(L, prec, smem_bw, N=32), 4, 2
    if key == "w48":
        return f22_unit(L, prec, smem_bw, N=48, raw_mode="ldg"), 4, 2
    if key == "wrs":
        return f22_unit(L, prec, smem_bw, N=32, v_mode="rs"), 4, 2
    if key == "wres":
        return f22_unit(L, prec, smem_bw, N=32, v_once=True), 4, 2
    if key == "wpp":
        d = dict(f22_unit(L, prec, smem_bw, N=24, count_v=False, count_u=False, count_exch=False, epi_ipc=1.0,
                          xi_split=False))
        d["total"] = max(d["main"], d["epi"])
        return d, 4, 2
    if key == "wlb":
        return f22_unit(L, prec, smem_bw, N=48, count_v=False, count_u=False, count_exch=False, epi_ipc=1.0), 4, 2
    if key == "wlb_ov":
        d = f22_unit(L, prec, smem_bw, N=48, count_v=False, count_u=False, count_exch=False, epi_ipc=1.0)
        d = dict(d)
        d["total"] = max(d["main"], d["epi"])
        return d, 4, 2
    if key == "f12":
        return f12_unit(L, prec, smem_bw), 2, 1
    raise KeyError(key)


def direct64_unit(L, prec, smem_bw):
    """A direct variant for K <= 64 (not built): m64n64 wgmmas, 8 x 64-pixel tiles (4 rows per warpgroup,
    128 accumulators per thread), so no half-idle N = 128 instruction."""
    C = L["C"]
    e, bc = HW["elem_bytes"][prec], HW["k_per_wgmma"][prec]
    stages = cdiv(C, bc)
    raw = 10 * 68 * bc * 4
    by = dict(wgmma=72 * (64 + 64) * bc * e, raw_tma=raw, raw_read=raw, v_write=10 * 66 * bc * e,
              u_tma=9 * 64 * bc * e, exch=0)
    tensor = 72 * 64 * 64 * bc / HW["mac_per_clk"][prec]
    smem_cyc = sum(by.values()) / smem_bw
    l2 = raw / HW["l2_distinct_B_per_clk"] + by["u_tma"] / HW["l2_shared_B_per_clk"]
    stage = max(tensor, smem_cyc, l2)
    epi = 2 * (EPI_FOLD[prec] * 64 / 128 + EPI_FINISH[prec])
    return dict(unit_out=512, main=stages * stage, epi=epi, total=stages * stage + epi, stage_bytes=by,
                stage_tensor=tensor, stage_smem=smem_cyc, stage_l2=l2, stage_prod=0.0, stage=stage,
                smem_per_mac=sum(by.values()) / (72 * 64 * 64 * bc))


def layer_time(key, L, prec, smem_bw, fractional=False):
    """ms of design `key` on layer L: units in whole waves over the SMs (fractional=True: units / SMs, as if
    the planner's splits filled every SM exactly; used to compare layers with less than a wave or two)."""
    if key == "d64":
        d, rows, tile_rows = direct64_unit(L, prec, smem_bw), 8, 1
    else:
        d, rows, tile_rows = design_unit(key, L, prec, smem_bw)
    if key in ("direct", "d64"):
        units, waves = units_and_waves(L, d["unit_out"], rows)
    else:
        units, waves = wino_units(L, d["unit_out"], rows, tile_rows)
    if fractional:  # exact fractions of units (no rounding of flat units either)
        P, Q = PQ(L)
        if Q < 62:
            if key in ("direct", "d64"):
                units = L["N"] * P * Q / d["unit_out"]
            else:
                units = L["N"] * cdiv(P, tile_rows) * tile_rows * cdiv(Q, 2) * 2 / d["unit_out"]
        waves = units / HW["sms"]
    ms = waves * d["total"] / (HW["clk_ghz"] * 1e9) * 1e3
    return ms, d, units, waves


def load_measured(path):
    meas = {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return meas
    for c in data.get("cases", []):
        for r in c.get("rows", []):
            v = r.get("variant", "")
            name = c["name"]
            if name == "seed" and v in ("convred fused wgmma tf32", "convred fused wgmma bf16"):
                meas[("seed", "tf32" if v.endswith("tf32") else "bf16")] = r["ms"]
            if v in ("convred plan tf32", "convred plan bf16") and r.get("ms"):
                nm = "seed.n64" if name == "seed.n64" else name
                meas[(nm, "tf32" if v.endswith("tf32") else "bf16")] = r["ms"]
    return meas


def part_smem(out, res, smem_bw):
    out("### 3. Shared memory and L2 per stage (seed, C = 64, K = 128)\n")
    out(f"A stage is one wgmma k-step: 8 input channels (tf32) or 16 (bf16). Bytes through shared memory per stage "
        f"and per channel pass, the cycles they take at {smem_bw:.0f} B/clk, the tensor cycles of the same stage, "
        "and the L2 -> SM copies (raw x boxes at the ~37 B/clk per SM that bulk copies of distinct data reached "
        "on all SMs, the filter at ~75 B/clk for data every SM reads: bench/NOTES.md session 12).\n")
    out("| design | prec | wgmma operand reads | raw x TMA + producer reads | V (planes) written | filter slice TMA | exchange | total KB | smem cyc | tensor cyc | L2 cyc | producer issue cyc | B per MAC (budget tf32 0.125, bf16 0.0625) |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for key, label in DESIGNS:
        if key in ("wlb_ov", "wpp"):
            continue
        for prec in ("tf32", "bf16"):
            if key == "wres" and prec == "tf32":
                continue
            d, _, _ = design_unit(key, SEED, prec, smem_bw)
            b = d["stage_bytes"]
            tot = sum(b.values())
            out(f"| {label} | {prec} | {b['wgmma']/1024:.1f} | {(b['raw_tma']+b['raw_read'])/1024:.1f} | {b['v_write']/1024:.1f} | "
                f"{b['u_tma']/1024:.1f} | {b['exch']/1024:.1f} | {tot/1024:.1f} | {d['stage_smem']:.0f} | {d['stage_tensor']:.0f} | "
                f"{d['stage_l2']:.0f} | {d['stage_prod']:.0f} | {d['smem_per_mac']:.3f} |")
            rows.append(dict(design=key, prec=prec, bytes=b, smem=d["stage_smem"], tensor=d["stage_tensor"],
                             l2=d["stage_l2"], prod=d["stage_prod"], b_per_mac=d["smem_per_mac"]))
    out("")
    # capacity: stage buffers that must coexist
    out("Capacity (227 KB = 232,448 B per block): operand stage = V slice + filter slice (the filter cannot be "
        "resident: U = 16*C*K*e = 512 KB tf32 / 256 KB bf16 on the seed, 2x / 4x the direct kernel's packed "
        "filter per byte of GEMM work), plus 2 raw boxes of 8 fp32 channels (13,056 B each), an exchange buffer "
        "for the output transform (16 KB) and ~1 KB of barriers:\n")
    out("| design | prec | V per stage | U per stage | stage | stages that fit | V of a whole unit (all C) |")
    out("|---|---|---:|---:|---:|---:|---:|")
    cap = []
    for prec in ("tf32", "bf16"):
        e, bc = HW["elem_bytes"][prec], HW["k_per_wgmma"][prec]
        for N in (32, 48, 128):
            v = 16 * 64 * bc * e
            u = 16 * bc * N * e
            rest = 2 * 13056 + 16384 + 1024
            fit = (HW["smem_bytes"] - rest) // (v + u)
            whole = 16 * 64 * SEED["C"] * e
            out(f"| F(2x2), T = 64, N = {N} | {prec} | {v/1024:.0f} KB | {u/1024:.0f} KB | {(v+u)/1024:.0f} KB | {fit} | {whole/1024:.0f} KB |")
            cap.append(dict(prec=prec, N=N, v=v, u=u, fit=int(fit), whole=whole))
        d = direct_unit(SEED, prec, smem_bw)
        out(f"| direct (today) | {prec} | {6*66*bc*e/1024:.1f} KB planes | {9*128*bc*e/1024:.0f} KB ({'resident' if d['resident'] else 'streamed'}) | | 4 (default) | |")
    out("")
    out("The transformed input of a 64-tile unit over all 64 channels is 256 KB in tf32 (128 KB bf16): it cannot "
        "stay in shared memory across the K/N channel passes that the registers force, so every pass makes it "
        "again (input transform, raw reads, V writes) and streams the filter again.\n")
    res["smem"] = dict(stage=rows, capacity=cap)


def part_time(out, res, smem_bw, meas):
    out(f"### 4. Time model (cycles per unit at 1.78 GHz, units in waves over 132 SMs; shared memory {smem_bw:.0f} B/clk)\n")
    out("Per stage: max(tensor, shared memory, L2 -> SM, producer issue); per unit: the stages of every channel "
        "pass, then the epilogue, which the cooperative schedule does not overlap with the tensor work (today's "
        "measured fold 2,636 cycles per 128 channels + 1,325 reduce/store per 256 pixels, tf32; 2,600 + 1,300 "
        "bf16), plus for Winograd the output transform and the warpgroups' exchange (28 FADD + 8 LDS/STS per "
        "(tile, channel), two warps per scheduler at 0.5 instructions per clock; 1.0 in the bounds).\n")
    # check of the model on the direct kernel
    out("**Check on today's kernel (seed):**\n")
    out("| prec | tensor / stage | smem / stage | per tile: main + epilogue | model ms (125 waves) | measured ms | measured / model |")
    out("|---|---:|---:|---:|---:|---:|---:|")
    calib = {}
    for prec in ("tf32", "bf16"):
        ms, d, units, waves = layer_time("direct", SEED, prec, smem_bw)
        m = meas.get(("seed", prec))
        calib[prec] = (m / ms) if m else None
        out(f"| {prec} | {d['stage_tensor']:.0f} | {d['stage_smem']:.0f} | {d['main']:.0f} + {d['epi']:.0f} = {d['total']:.0f} | "
            f"{ms:.3f} | {m if m else float('nan'):.3f} | {calib[prec] if calib[prec] else float('nan'):.3f} |")
    out("")
    out("**Seed, per design** (raw model; calibrated = raw x today's measured/model ratio of the same precision):\n")
    out("| design | prec | per unit: main + epilogue (cycles) | bound per stage | model ms | calibrated ms | vs today | target |")
    out("|---|---|---:|---|---:|---:|---:|---|")
    seed_rows = []
    for key, label in DESIGNS:
        for prec in ("tf32", "bf16"):
            if key == "wres" and prec == "tf32":
                continue  # 256 KB of V per unit: does not fit
            ms, d, units, waves = layer_time(key, SEED, prec, smem_bw)
            c = calib[prec]
            cal = ms * c if c else float("nan")
            today = meas.get(("seed", prec))
            vs = (cal / today) if (today and c) else float("nan")
            terms = {"tensor": d["stage_tensor"], "smem": d["stage_smem"], "L2": d["stage_l2"], "producer": d["stage_prod"]}
            if key in ("wlb", "wlb_ov", "wpp"):
                terms = {"tensor": d["stage_tensor"], "smem": d["stage_smem"]}
            bound = max(terms, key=terms.get)
            tgt = 1.0 if prec == "tf32" else 0.6
            ok = "met" if cal <= tgt else "missed"
            out(f"| {label} | {prec} | {d['main']:.0f} + {d['epi']:.0f} = {d['total']:.0f} | {bound} "
                f"({terms[bound]/d['stage_tensor']:.2f}x tensor) | {ms:.3f} | {cal:.3f} | {vs:.2f}x | <= {tgt} ms: {ok} |")
            seed_rows.append(dict(design=key, prec=prec, main=d["main"], epi=d["epi"], total=d["total"], ms=ms,
                                  calibrated_ms=cal, vs_today=vs, bound=bound))
    out("")
    # what it would take: the shared-memory rate at which the best design meets the targets
    out("**What the targets need.** The shared-memory rate (B/clk/SM, tried up to 2,048) at which each design's "
        "calibrated seed time meets TF32 <= 1.0 ms / bf16 <= 0.6 ms; 'none' = not even with unlimited "
        "shared-memory bandwidth, where the tensor time, the L2 -> SM copies (raw x and the streamed filter), the producer and the non-overlapped epilogue remain:\n")
    out("| design | tf32 <= 1.0 ms | bf16 <= 0.6 ms | time at unlimited smem bandwidth (tf32 / bf16, calibrated) |")
    out("|---|---:|---:|---:|")
    need = {}
    for key, label in DESIGNS:
        if key in ("direct", "wres"):
            continue
        cells = []
        inf_t = []
        for prec, tgt in (("tf32", 1.0), ("bf16", 0.6)):
            c = calib[prec] or 1.0
            found = None
            for bw in (128, 160, 192, 256, 320, 384, 512, 768, 1024, 2048):
                if layer_time(key, SEED, prec, bw)[0] * c <= tgt:
                    found = bw
                    break
            cells.append(f"{found} B/clk" if found else "none")
            inf_t.append(layer_time(key, SEED, prec, 1e12)[0] * c)
            need[(key, prec)] = found
        out(f"| {label} | {cells[0]} | {cells[1]} | {inf_t[0]:.2f} / {inf_t[1]:.2f} ms |")
    out("")
    # the suite
    out("**The suite's 3x3 stride-1 layers.** Throughput view: units / 132 SMs without wave quantisation (the "
        "planner's split-K and pass mode fill the SMs on small layers, and both sides would get the same "
        "treatment), each Winograd time calibrated by measured / model of today's direct kernel on the same "
        "layer and precision (measured: the planner's rows of bench/results/h200_2026-12-03_families.json). "
        "Batch-1 rows are launch- and latency-bound (10-50 us), where a throughput model says little. "
        "'direct N=64' is a direct variant for K <= 64 (m64n64, 8-row tiles; not built): on the K = 64 layers "
        "today's N = 128 wgmmas run half idle, and part of any Winograd gain there is that half.\n")
    out("| layer | units (direct) | prec | measured today ms | F(2x2) N=32 | F(2x2) N=48+LDG | F(2x2) bound | F(1x2) | direct N=64 | best real F(2x2)/F(1x2) vs today |")
    out("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    suite_rows = []
    for L in suite_layers():
        for prec in ("tf32", "bf16"):
            dms, dd, du, dw = layer_time("direct", L, prec, smem_bw, fractional=True)
            name = "seed.n64" if L["name"] == "seed.n64" else L["name"]
            m = meas.get((name, prec))
            cal = (m / dms) if m else None
            vals = {}
            for key in ("w32", "w48", "wlb", "f12", "d64"):
                if key == "d64" and L["K"] > 64:
                    vals[key] = float("nan")
                    continue
                ms = layer_time(key, L, prec, smem_bw, fractional=True)[0]
                vals[key] = ms * cal if cal else float("nan")
            best = min(vals["w32"], vals["w48"], vals["f12"])
            ratio = best / m if m else float("nan")
            d64 = f"{vals['d64']:.4f}" if vals["d64"] == vals["d64"] else "-"
            ustr = f"{du:,.0f}" if du >= 10 else f"{du:.2f}"
            out(f"| {L['name']} | {ustr} | {prec} | {m if m else float('nan'):.4f} | {vals['w32']:.4f} | {vals['w48']:.4f} | "
                f"{vals['wlb']:.4f} | {vals['f12']:.4f} | {d64} | {ratio:.2f}x |")
            suite_rows.append(dict(layer=L["name"], prec=prec, units=du, measured=m, **{k: v for k, v in vals.items()},
                                   best_ratio=ratio))
    out("")
    res["time"] = dict(calibration=calib, seed=seed_rows, need_bw={f"{k[0]}/{k[1]}": v for k, v in need.items()},
                       suite=suite_rows, smem_bw=smem_bw)


# ----------------------------------------------------------------------------------------------------------
# 5. Accuracy
# ----------------------------------------------------------------------------------------------------------
def round_tf32(a):
    """float32 -> tf32 values (as float32), round to nearest even on the low 13 mantissa bits (cvt.rn.tf32.f32)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = (b + (np.uint32(0x0FFF) + ((b >> np.uint32(13)) & np.uint32(1)))) & np.uint32(0xFFFFE000)
    return r.view(np.float32)


def trunc_tf32(a):
    """float32 -> tf32 by dropping the low 13 bits (what a tensor core reading fp32 bits uses without a cvt)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return (b & np.uint32(0xFFFFE000)).view(np.float32)


def round_bf16(a):
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = (b + (np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return r.view(np.float32)


def self_test_rounding():
    cases = [(1 + 2.0 ** -11, 1.0), (1 + 3 * 2.0 ** -11, 1 + 2 * 2.0 ** -10), (1 + 2.0 ** -11 + 2.0 ** -20, 1 + 2.0 ** -10)]
    for v, want in cases:
        got = float(round_tf32(np.array([v], np.float32))[0])
        assert got == want, (v, got, want)
    assert float(round_bf16(np.array([1 + 2.0 ** -8], np.float32))[0]) == 1.0
    assert float(round_bf16(np.array([1 + 3 * 2.0 ** -8], np.float32))[0]) == 1 + 2.0 ** -6
    assert float(trunc_tf32(np.array([1 + 2.0 ** -10 - 2.0 ** -20], np.float32))[0]) == 1.0


PRECS = {
    "fp32": lambda a: np.asarray(a, np.float32),
    "tf32": round_tf32,
    "tf32-trunc": trunc_tf32,
    "bf16": round_bf16,
}


def split3_matmul(a, b):
    """3xTF32: a = a_big + a_small, b likewise (each part tf32), small products first, fp32 accumulation."""
    ab, bb = round_tf32(a), round_tf32(b)
    as_, bs = round_tf32(a - ab), round_tf32(b - bb)
    return (as_ @ bb + ab @ bs) + ab @ bb


def matmul_prec(a32, b32, prec, acc="fp32"):
    if prec == "3xtf32":
        return split3_matmul(a32, b32)
    ra, rb = PRECS[prec](a32), PRECS[prec](b32)
    if acc == "fp64":
        return (ra.astype(np.float64) @ rb.astype(np.float64)).astype(np.float32)
    return ra @ rb  # products of <= 12-bit significands are exact in fp32; the sum is fp32 (BLAS order)


def direct_conv(x, w, prec, acc="fp32"):
    """x (N, C, H, W) float32, w (K, C, 3, 3) float32 -> (N, K, P, Q) float32 (or float64 for 'ref')."""
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H - 2, W - 2
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # N, C, P, Q, 3, 3
    cols = np.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(N * P * Q, C * 9)
    wm = w.reshape(K, C * 9).T
    if prec == "ref":
        z = cols.astype(np.float64) @ wm.astype(np.float64)
    else:
        z = matmul_prec(cols, np.ascontiguousarray(wm), prec, acc)
    return z.reshape(N, P, Q, K).transpose(0, 3, 1, 2)


def bt_1d(d0, d1, d2, d3):
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


def at_1d(m0, m1, m2, m3):
    return m0 + (m1 + m2), (m1 - m2) - m3


def f22_conv(x, w, prec, acc="fp32"):
    """F(2x2,3x3) as the kernel would compute it: V = B^T d B in fp32 adds, U = G g G^T exact (float64, then
    fp32), both rounded to the precision, 16 GEMMs over C with fp32 accumulation, A^T M A in fp32 adds."""
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H - 2, W - 2
    TY, TX = P // 2, Q // 2  # even P, Q here
    d = np.lib.stride_tricks.sliding_window_view(x, (4, 4), axis=(2, 3))[:, :, ::2, ::2]  # N, C, TY, TX, 4, 4
    d = d[:, :, :TY, :TX].astype(np.float32)
    # columns (over rows i of the window) then rows
    r = [d[..., i, :] for i in range(4)]
    r = bt_1d(*r)  # each N, C, TY, TX, 4 (columns j)
    v = np.empty((4, 4) + d.shape[:4], np.float32)
    for i in range(4):
        cs = bt_1d(*[r[i][..., j] for j in range(4)])
        for j in range(4):
            v[i, j] = cs[j]
    # filter: exact transform in float64, then fp32
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
    u = np.einsum("ar,kcrs,bs->abkc", G, w.astype(np.float64), G).astype(np.float32)  # 4, 4, K, C
    m = np.empty((4, 4, N, TY, TX, K), np.float32)
    for i in range(4):
        for j in range(4):
            a = np.ascontiguousarray(v[i, j].transpose(0, 2, 3, 1)).reshape(N * TY * TX, C)
            b = np.ascontiguousarray(u[i, j].T)  # C x K
            if prec == "ref":
                mm = a.astype(np.float64) @ b.astype(np.float64)
            else:
                mm = matmul_prec(a, b, prec, acc)
            m[i, j] = mm.reshape(N, TY, TX, K)
    # output transform: columns over i, then rows over j
    t = [at_1d(*[m[i, j] for i in range(4)]) for j in range(4)]  # t[j] = (row0, row1)
    y = np.empty((N, K, P, Q), np.float32)
    for a_ in range(2):
        o = at_1d(*[t[j][a_] for j in range(4)])
        for b_ in range(2):
            y[:, :, a_::2, b_::2] = o[b_].transpose(0, 3, 1, 2)
    return y


def f12_conv(x, w, prec, acc="fp32"):
    """F(1x2,3x3): a 1-D F(2,3) along each row, the 3 filter rows summed in the same accumulators."""
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H - 2, W - 2
    TX = Q // 2
    d = np.lib.stride_tricks.sliding_window_view(x, 4, axis=3)[:, :, :, ::2][:, :, :, :TX]  # N, C, H, TX, 4
    vj = bt_1d(*[d[..., j].astype(np.float32) for j in range(4)])  # each N, C, H, TX
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
    u = np.einsum("js,kcrs->jrkc", G, w.astype(np.float64)).astype(np.float32)  # 4, 3(r), K, C
    ms = []
    for j in range(4):
        # A: (N, P, TX) x (r, c): rows p + r of V_j
        a = np.stack([vj[j][:, :, r:r + P] for r in range(3)], axis=1)  # N, 3, C, P, TX
        a = np.ascontiguousarray(a.transpose(0, 3, 4, 1, 2)).reshape(N * P * TX, 3 * C)
        b = np.ascontiguousarray(u[j].transpose(0, 2, 1)).reshape(3 * C, K)
        mm = (a.astype(np.float64) @ b.astype(np.float64)) if prec == "ref" else matmul_prec(a, b, prec, acc)
        ms.append(mm.reshape(N, P, TX, K).astype(np.float32))
    o0, o1 = at_1d(*ms)
    y = np.empty((N, K, P, Q), np.float32)
    y[..., 0::2] = o0.transpose(0, 3, 1, 2)
    y[..., 1::2] = o1.transpose(0, 3, 1, 2)
    return y


def epilogue(z, b):
    """y = min over k of 2 * (z + b) (fp32 epilogue as the kernel; float64 for the reference)."""
    if z.dtype == np.float64:
        return (2.0 * (z + b.astype(np.float64)[None, :, None, None])).min(axis=1)
    return (np.float32(2.0) * (z + b[None, :, None, None])).min(axis=1)


def rel(a, ref):
    a = a.astype(np.float64)
    return float(np.linalg.norm((a - ref).ravel()) / np.linalg.norm(ref.ravel()))


def part_accuracy(out, res, images, size, seed, dists):
    self_test_rounding()
    out(f"### 5. Accuracy (numpy, {images} images of {size}x{size}, C = 64, K = 128, 3x3, no padding; W, b as "
        "torch.nn.Conv2d initialises them: U(-1/24, 1/24) with fan-in 576)\n")
    out("Relative-norm error vs float64 direct convolution of y = min_k 2(conv + b) (the issue's metric) and of "
        "the conv itself (all K channels, before the min), and the largest |error| / |y| over the outputs. "
        "Winograd: V = B^T d B formed in fp32 adds from the fp32 x and rounded to the precision as the kernel "
        "would; U = G g G^T exact (float64) then fp32, then rounded; the products of rounded operands are exact "
        "in fp32 and summed in fp32 (BLAS order; the tensor cores' truncating accumulation is not emulated); A^T M A "
        "in fp32 adds. 3xTF32: both operands split into two tf32 parts, big*small + small*big + big*big. "
        "tf32-trunc: the low 13 bits dropped (a kernel that skipped the cvt). 'fp64 acc': the same rounded "
        "operands summed in float64.\n")
    rng = np.random.default_rng(seed)
    Cc, Kk = 64, 128
    bound = 1.0 / math.sqrt(Cc * 9)
    w = rng.uniform(-bound, bound, (Kk, Cc, 3, 3)).astype(np.float32)
    b = rng.uniform(-bound, bound, (Kk,)).astype(np.float32)
    rows = []
    t0 = time.time()
    for dist in dists:
        if dist == "normal":
            x = rng.standard_normal((images, Cc, size, size)).astype(np.float32)
        else:
            x = rng.random((images, Cc, size, size)).astype(np.float32)
        zref = direct_conv(x, w, "ref")
        yref = epilogue(zref, b)
        out(f"x ~ {'N(0,1)' if dist == 'normal' else 'U[0,1)'}:\n")
        out("| precision | direct: y rel-norm | F(2x2): y rel-norm | F(1x2): y rel-norm | direct: conv rel-norm | F(2x2): conv rel-norm | direct: max rel | F(2x2): max rel | F(2x2)/direct (y) |")
        out("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for prec, acc in (("fp32", "fp32"), ("tf32", "fp32"), ("tf32", "fp64"), ("tf32-trunc", "fp32"),
                          ("bf16", "fp32"), ("bf16", "fp64"), ("3xtf32", "fp32")):
            zd = direct_conv(x, w, prec, acc)
            zw = f22_conv(x, w, prec, acc)
            z1 = f12_conv(x, w, prec, acc)
            yd, yw, y1 = epilogue(zd, b), epilogue(zw, b), epilogue(z1, b)
            r = dict(dist=dist, prec=prec, acc=acc, direct_y=rel(yd, yref), f22_y=rel(yw, yref), f12_y=rel(y1, yref),
                     direct_conv=rel(zd, zref), f22_conv=rel(zw, zref),
                     direct_max=float(np.max(np.abs(yd - yref) / np.abs(yref))),
                     f22_max=float(np.max(np.abs(yw - yref) / np.abs(yref))))
            rows.append(r)
            label = prec + ("" if acc == "fp32" else ", fp64 acc")
            out(f"| {label} | {r['direct_y']:.2e} | {r['f22_y']:.2e} | {r['f12_y']:.2e} | {r['direct_conv']:.2e} | "
                f"{r['f22_conv']:.2e} | {r['direct_max']:.1e} | {r['f22_max']:.1e} | {r['f22_y']/r['direct_y']:.2f} |")
        out("")
    out(f"(accuracy part: {time.time() - t0:.1f} s on one core)\n")
    res["accuracy"] = rows


# ----------------------------------------------------------------------------------------------------------
# 6. Microbenchmarks
# ----------------------------------------------------------------------------------------------------------
def part_micro(out, res, smem_bw):
    out("### 6. Microbenchmarks to run first (what the model expects)\n")
    out(f"1. **wgmma operand bandwidth vs N.** One block per SM, two consumer warpgroups, no producer: each issues "
        "long commit groups of independent `wgmma.mma_async` m64nNk8 tf32 (and m64nNk16 bf16) with both "
        "operands in shared memory (SS), distinct A and B descriptors per instruction, N = 16, 24, 32, 48, 64, "
        "128, 256; then the same with A from registers (RS). Clock64 per wgmma per SM. The model "
        f"({smem_bw:.0f} B/clk, B broadcast to the 4 warps' tensor cores) expects:\n")
    out("| N | tensor cyc / wgmma | SS smem cyc | SS % of tensor peak | RS % (B broadcast) | RS % (B read per warp) |")
    out("|---:|---:|---:|---:|---:|---:|")
    mb = []
    for N in (16, 24, 32, 48, 64, 128, 256):
        t = 64 * N * 8 / 1024
        s = (64 + N) * 8 * 4 / smem_bw
        rs = N * 8 * 4 / smem_bw
        rs4 = 4 * N * 8 * 4 / smem_bw
        out(f"| {N} | {t:.0f} | {s:.0f} | {100*t/max(t,s):.0f}% | {100*t/max(t,rs):.0f}% | {100*t/max(t,rs4):.0f}% |")
        mb.append(dict(N=N, tensor=t, ss_smem=s, ss_pct=t / max(t, s), rs_pct=t / max(t, rs)))
    out("")
    out("   If SS at N = 32 runs at >= 90% of the tensor rate, the operand path is wider than 128 B/clk and the "
        "model must be rerun with `--smem-bw` set to what it shows; if it runs at ~67% as expected, the F(2x2) "
        "design is shared-memory-bound as modelled.\n")
    d = f22_unit(SEED, "tf32", smem_bw, N=32)
    b = d["stage_bytes"]
    out(f"2. **Do wgmma reads and LDS/STS/TMA writes share the budget?** Benchmark 1 at N = 32 (SS) while a producer "
        f"warpgroup streams STS.128 + LDS.128 and a thread lands TMA boxes at the F(2x2) N = 32 design's rate "
        f"(per 8-channel stage of {d['stage_tensor']:.0f} tensor cycles: {b['v_write']/1024:.0f} KB of V written, "
        f"{b['raw_read']/1024:.1f} KB of raw windows read, {b['raw_tma']/1024:.1f} KB of box and {b['u_tma']/1024:.0f} KB "
        f"of filter landed, {b['exch']/1024:.0f} KB of exchange). Model: stage = {sum(b.values())/1024:.0f} KB / "
        f"{smem_bw:.0f} = {d['stage_smem']:.0f} cycles instead of {b['wgmma']/smem_bw:.0f} (wgmma reads alone) or "
        f"{d['stage_tensor']:.0f} (tensor): the wgmma rate falls to ~{100*d['stage_tensor']/d['stage_smem']:.0f}% of peak. "
        "If the wgmma rate holds while the other traffic runs, the operand path is separate and the model's "
        "shared-memory term is too pessimistic.\n")
    wi = sum(IN_INSTR["tf32"].values())
    out(f"3. **The input transform's throughput.** A producer warpgroup (3 warps; then 7 with two warpgroups) "
        f"turning 4x4 fp32 windows of a TMA-landed 6 x 68 patch into 16 tf32 xi planes (K-major 16-byte chunks, "
        f"the layout wgmma reads): cycles per (tile, channel), alone and beside benchmark 1. Model: ~{wi} "
        f"instructions per (tile, c) -> {64*8*wi/96:.0f} issue cycles per 64-tile 8-channel stage with 3 warps "
        f"({64*8*wi/128:.0f} with 4+), shared memory ~{(32768+3*13056)/smem_bw:.0f} cycles; today's producer converts "
        "~2.3 values per clock (bench/NOTES.md session 5: 1.1-1.7k cycles per 3,264-value stage), which would be "
        f"~{8192/2.3:,.0f} cycles for the 8,192 V values of one stage: the transform has to run ~{8192/2.3/d['stage_smem']:.0f}x "
        f"faster than today's conversion to keep up with the shared-memory bound of the stage ({d['stage_smem']:.0f} "
        f"cycles) and ~{8192/2.3/d['stage_tensor']:.0f}x to keep up with its tensor work ({d['stage_tensor']:.0f}).\n")
    out("4. **Output transform + exchange + fold per pass** (N = 32, two warpgroups, 8 xi each): cycles per pass "
        f"against the model's {64*32*(OUT_INSTR['fadd']+OUT_INSTR['mem'])/256*2/0.5:.0f} (IPC 0.5) + "
        f"{EPI_FOLD['tf32']*32/128:.0f} (the fold, today's rate).\n")
    res["micro"] = mb


def part_rates(out, res, smem_bw):
    out("### Rates the model uses (H200 SXM, 132 SMs)\n")
    out("| resource | per SM per clock | whole GPU | source |")
    out("|---|---|---|---|")
    f = HW["clk_ghz"]
    out(f"| clock under this load | {f} GHz | | bench/NOTES.md session 5 (clock64 per tile vs ms), session 13 (ncu: 1.79 GHz) |")
    out(f"| TF32 tensor, dense | 1,024 MAC | {132*2048*f/1e3:.0f} TFLOP/s at {f} GHz; cuBLAS measured 394-418; datasheet 495 | NOTES session 13 (ncu: m64n128k8 = 64 cycles, tensor pipe ~95% busy); NVIDIA H100/H200 datasheet |")
    out("| BF16 / FP16 tensor, dense | 2,048 MAC | measured cuBLAS 756; datasheet 989 | the same |")
    out(f"| FP32 FFMA / FADD | 128 lanes | {132*128*2*1.98/1e3:.0f} TFLOP/s at 1.98 GHz (datasheet 67); measured FFMA 50.5 | Hopper SM: 4 x 32 FP32 lanes; docs/performance.md (measured) |")
    out("| instruction issue | 4 warp instr (128 thread instr) | | one scheduler per SM sub-partition |")
    out(f"| shared memory | {smem_bw:.0f} B | | 32 banks x 4 B; the project's model of the direct kernel (NOTES, \"What bounds v2b\") |")
    out("| shared memory capacity | 227 KB per block | | CUDA (sm_90 opt-in maximum 232,448 B) |")
    out("| registers | 65,536 x 32 bit, <= 255 per thread | | CUDA |")
    out("| L2 -> SM (bulk copies) | ~37 B (distinct data), ~75 B (same data) | 8.7 / 17.8 TB/s | NOTES session 12 (bench/bulk_copy_rate.cu) |")
    out("| HBM | | 4.18 TB/s copy | docs/performance.md (measured) |")
    out("")
    out("Per clock the SM's tensor cores do 1,024 TF32 multiply-adds against 128 FP32 CUDA-core operations and "
        "128 bytes of shared memory: 8 multiply-adds per CUDA-core op and per byte (16 in bf16). The direct "
        "kernel needs ~0.12 B of shared memory per multiply-add (tf32): it already sits at that budget.\n")
    res["rates"] = HW


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="rates,work,regs,smem,time,accuracy,micro")
    ap.add_argument("--smem-bw", type=float, default=128.0, help="shared-memory bytes per clock per SM")
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--size", type=int, default=64, help="image height and width (even: P, Q even)")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--dists", default="normal,uniform", help="x distributions: normal (N(0,1)), uniform (U[0,1))")
    ap.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "h200_2026-12-03_families.json"))
    ap.add_argument("--json", default="", help="write every number to this file")
    args = ap.parse_args()
    if args.size % 2:
        ap.error("--size must be even")
    HW["smem_B_per_clk"] = args.smem_bw
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    res = {"args": vars(args)}
    meas = load_measured(args.results)
    res["measured"] = {f"{k[0]}/{k[1]}": v for k, v in meas.items()}

    def out(s=""):
        print(s)
        sys.stdout.flush()

    for p in parts:
        if p == "rates":
            part_rates(out, res, args.smem_bw)
        elif p == "work":
            part_work(out, res)
        elif p == "regs":
            part_regs(out, res)
        elif p == "smem":
            part_smem(out, res, args.smem_bw)
        elif p == "time":
            part_time(out, res, args.smem_bw, meas)
        elif p == "accuracy":
            part_accuracy(out, res, args.images, args.size, args.seed, [d for d in args.dists.split(",") if d])
        elif p == "micro":
            part_micro(out, res, args.smem_bw)
        else:
            ap.error(f"unknown part {p}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=float)


if __name__ == "__main__":
    main()
