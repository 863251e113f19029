#!/usr/bin/env python3
"""Lists the plans a planner change moves, on the host: the layers of torchvision_sweep.py result files
planned again by bench/plan_table (built from the working tree), compared with the kernels those results
recorded, per math (tf32, bf16, accurate).

    python3 bench/plan_changes.py --table build/bench/plan_table \\
        bench/results/h200_2026-12-05_sample205_sweep.json [--out bench/plan_changes_<date>.json]

A plan has moved when its description differs from the recorded kernel's (--prefix N compares the first N
characters only: 60 is bench/check_predictions.py's rule, which sees the family and the tile but not, for
the direct kernel, the channel groups, channels per stage or blocks per tile). Prints one row per moved (layer, math): the time measured before,
the kernel before and after, and the new plan's estimate. --out writes the moved layers (all their maths)
with their measurement before as a plan_changes file: `torchvision_sweep.py --layers-json` measures it,
then `check_predictions.py --changes <it> --after <sweep.json>` sets the two runs side by side. A layer
present in several files keeps the first file's record. --write-layers FILE writes the layers' plan_table
input lines instead (bench/plans/layers.txt, the planner's snapshot test, was made so). Needs no GPU and no
PyTorch.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

MATHS = ("tf32", "bf16", "accurate")


def layer_line(L):
    """plan_table's input line for a sweep layer: N C H W K R S stride padding dilation groups, then the name."""
    two = lambda v: list(v) if isinstance(v, (list, tuple)) else [v, v]
    vals = [L["N"], L["C"], L["H"], L["W"], L["K"], L["R"], L["S"]] + two(L["stride"]) + two(L["padding"]) + \
        two(L["dilation"]) + [L["groups"]]
    return " ".join(str(int(v)) for v in vals) + " " + L["name"]


def load_layers(paths, measured=True):
    """name -> the layer record (a measured one's speedups hold the ms and kernel per math), first file first;
    measured=False: every layer, measured or not (a layer list such as bench/suite_layers.json)."""
    layers = {}
    for path in paths:
        with open(path) as f:
            for L in json.load(f)["layers"]:
                if (L.get("speedups") or not measured) and L["name"] not in layers:
                    layers[L["name"]] = L
    return layers


def plan_all(table, layers):
    """name -> {math: (estimate_us, description)} from one run of plan_table over every layer."""
    text = "\n".join(layer_line(L) for L in layers.values()) + "\n"
    out = subprocess.run([table], input=text, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"plan_changes: {table} failed: {out.stderr.strip()}")
    plans = {}
    for row in out.stdout.splitlines():
        name, math_, est, desc = row.split("\t", 3)
        plans.setdefault(name, {})[math_] = (float(est), desc)
    return plans


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+", help="torchvision_sweep.py result files (sweep.json)")
    ap.add_argument("--table", default="build/bench/plan_table", help="the plan_table executable")
    ap.add_argument("--prefix", type=int, default=0, help="compare the descriptions' first N characters (0: all)")
    ap.add_argument("--out", default=None, help="write the moved layers here (a plan_changes file)")
    ap.add_argument("--write-layers", default=None, metavar="FILE",
                    help="only write plan_table's input lines for every layer of the files (measured or not) to FILE")
    args = ap.parse_args(argv)
    if args.write_layers:
        with open(args.write_layers, "w") as f:
            f.write("# plan_table's layers (N C H W K R S stride_h stride_w pad_h pad_w dil_h dil_w groups name), from\n"
                    f"#   {' '.join(args.sweeps)}\n"
                    f"# written by: python3 bench/plan_changes.py --write-layers {args.write_layers} "
                    f"{' '.join(args.sweeps)}\n")
            f.write("".join(layer_line(L) + "\n" for L in load_layers(args.sweeps, measured=False).values()))
        return
    if args.prefix < 0:
        sys.exit("plan_changes: --prefix must be 0 (whole descriptions) or a positive count")
    for path in args.sweeps:
        if not os.path.exists(path):
            sys.exit(f"plan_changes: {path} does not exist")
    if not (os.path.exists(args.table) or shutil.which(args.table)):
        sys.exit(f"plan_changes: {args.table} does not exist (build it: the bench_plan_table target)")
    layers = load_layers(args.sweeps)
    if not layers:
        sys.exit("plan_changes: no measured layer in " + " ".join(args.sweeps))
    plans = plan_all(args.table, layers)
    moved = []
    for name, L in layers.items():
        rows = []
        for m in MATHS:
            before = L["speedups"].get(m)
            after = plans.get(name, {}).get(m)
            cut = args.prefix or None
            if not before or not after or before.get("kernel", "")[:cut] == after[1][:cut]:
                continue
            rows.append((m, before["ms"] * 1e3, before.get("kernel", ""), after[0], after[1]))
        if rows:
            moved.append((L, rows))
    print(f"{len(moved)} of {len(layers)} layers have a plan that moved ({sum(len(r) for _, r in moved)} rows)")
    for L, rows in moved:
        for m, us, kb, est, ka in rows:
            print(f"  {L['name']:<40} {m:<8} {us:9.1f} us  {kb[:48]:<48} -> {ka[:48]:<48} est {est:9.1f} us")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tool": "bench/plan_changes.py", "sources": args.sweeps,
                       "layers": [dict(L, rows=[]) for L, _ in moved]}, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
