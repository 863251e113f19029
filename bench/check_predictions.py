#!/usr/bin/env python3
"""Checks the planner's predicted plan changes against a new measurement: for each layer of a
bench/plan_changes_*.json file (the layers whose plans a host-side change moved, each with its
measurement before the change under "speedups"), the time a new torchvision_sweep.py result gives, side by
side, with the kernel before and after.

    python3 bench/check_predictions.py --changes bench/plan_changes_2026-12-04.json bench/plan_changes_2026-12-05.json \
        --after $OUT/sweep/sweep.json [--threshold 1.05]

Only rows whose plan changed count (the kernel descriptions differ, or their first N characters with
--prefix N: a plan_changes file lists every math of a layer, most of them unchanged); --all-rows counts the
others too. A row is
flagged "SLOWER" when after / before exceeds the threshold (default 1.05: 5 %), "faster" below its inverse;
the summary counts each and gives the geomean of after / before per math. A layer measured in
several --after files keeps its fastest time. Exit status 0 (a report, not a test); the caller decides
which change to revert (bench/NOTES.md says which change moved which plan).
"""
import argparse
import json
import math
import sys

MATHS = ("tf32", "bf16", "accurate")


def load_changes(paths):
    """name -> {math: (ms, kernel)} of the measurement before the change (the first file that has it)."""
    before = {}
    for path in paths:
        with open(path) as f:
            for layer in json.load(f)["layers"]:
                sp = layer.get("speedups") or {}
                entry = before.setdefault(layer["name"], {})
                for m in MATHS:
                    if m in sp and sp[m].get("ms") and m not in entry:
                        entry[m] = (sp[m]["ms"], sp[m].get("kernel", ""))
    return before


def load_after(paths):
    """name -> {math: (ms, kernel)}: convred's rows of the new sweep files, the fastest per layer and math."""
    after = {}
    for path in paths:
        with open(path) as f:
            for layer in json.load(f)["layers"]:
                for r in layer.get("rows", []):
                    if r.get("family") != "convred" or not r.get("ms") or r.get("precision") not in MATHS:
                        continue
                    entry = after.setdefault(layer["name"], {})
                    m = r["precision"]
                    if m not in entry or r["ms"] < entry[m][0]:
                        entry[m] = (r["ms"], r.get("kernel", ""))
    return after


def short(kernel):
    """The kernel description's first words (family and math), for the table."""
    return " ".join(kernel.split(" ")[:2]).rstrip(":,") if kernel else "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", nargs="+", required=True, help="bench/plan_changes_*.json files")
    ap.add_argument("--after", nargs="+", required=True, help="torchvision_sweep.py result files (sweep.json)")
    ap.add_argument("--threshold", type=float, default=1.05, help="after / before above this is SLOWER (1.05)")
    ap.add_argument("--all-rows", action="store_true", help="also the rows whose plan did not change")
    ap.add_argument("--prefix", type=int, default=0, help="compare the descriptions' first N characters (0: all)")
    args = ap.parse_args(argv)
    if args.prefix < 0:
        ap.error("--prefix must be 0 (whole descriptions) or a positive count")
    before, after = load_changes(args.changes), load_after(args.after)
    ratios = {m: [] for m in MATHS}
    flagged = {"SLOWER": 0, "faster": 0, "same": 0, "not measured": 0, "plan unchanged": 0}
    print(f"{'layer':44s} {'math':8s} {'before us':>10s} {'after us':>10s} {'ratio':>6s}  kernel before -> after")
    for name in sorted(before):
        for m in MATHS:
            if m not in before[name]:
                continue
            b_ms, b_k = before[name][m]
            a = after.get(name, {}).get(m)
            if a is None:
                flagged["not measured"] += 1
                print(f"{name:44s} {m:8s} {b_ms * 1e3:10.1f} {'--':>10s} {'':>6s}  {short(b_k)} -> (not measured)")
                continue
            a_ms, a_k = a
            cut = args.prefix or None
            if not args.all_rows and a_k[:cut] == b_k[:cut]:
                flagged["plan unchanged"] += 1
                continue
            r = a_ms / b_ms
            ratios[m].append(r)
            tag = "SLOWER" if r > args.threshold else "faster" if r < 1.0 / args.threshold else "same"
            flagged[tag] += 1
            print(f"{name:44s} {m:8s} {b_ms * 1e3:10.1f} {a_ms * 1e3:10.1f} {r:6.2f}  {short(b_k)} -> {short(a_k)}"
                  f"{'  ' + tag if tag != 'same' else ''}")
    print()
    print("summary: " + ", ".join(f"{k} {v}" for k, v in flagged.items()))
    for m in MATHS:
        if ratios[m]:
            g = math.exp(sum(math.log(r) for r in ratios[m]) / len(ratios[m]))
            print(f"  {m:8s} {len(ratios[m]):3d} rows, geomean after / before {g:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
