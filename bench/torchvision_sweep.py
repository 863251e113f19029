#!/usr/bin/env python3
"""Reach sweep (issue 32, step 1): every distinct nn.Conv2d call of torchvision's classification, segmentation
and detection models, timed as

    y = torch.amin(F.conv2d(x, W, b, stride, padding, dilation, groups) * 2.0, dim=1, keepdim=True)   (x fp32 NCHW)

through convred's PyTorch op and through PyTorch (eager and torch.compile), with a summary by layer class.

Collection (CPU, no GPU, nothing downloaded): every model of torchvision.models (classification),
torchvision.models.segmentation and torchvision.models.detection is built with weights=None (and
weights_backbone=None; torch.hub's downloader is disabled while collecting) and run once in eval mode with a
forward pre-hook on every nn.Conv2d, which records the input shape and the module's K, R, S, stride, padding,
dilation, groups. Input sizes are torchvision's documented ones:
  - classification: the crop size of the model's DEFAULT weights' transforms (224 for most; inception_v3 299,
    efficientnet_b1..b7 240..600, efficientnet_v2 384/480, swin_v2 256, regnet_y_128gf 384, vit_h_14 518);
    ViTs are built with that image_size;
  - segmentation: 520 x 520 (the DEFAULT weights' SemanticSegmentation(resize_size=520));
  - detection: a list of images of --det-image (default 480x640, a typical COCO photo); each model's own
    GeneralizedRCNNTransform resizes it as documented (min_size 800 -> 800x1067 padded to 800x1088; the
    *_320_fpn model 320; SSD 300x300, SSDlite 320x320).
Models run on the "meta" device (shapes only: no memory, no arithmetic) at each batch of --batches. Where that
fails (detection models: their transform and box logic need real values) the model runs on --fallback-device
(cpu, or cuda when there is one) at batch 1 with random weights, and N is scaled by the batch. The ROI heads'
convolutions see a data-dependent number of boxes: their N is set to torchvision's eval-mode count per image
(box head: the RPN's post_nms_top_n for testing, 1000; mask and keypoint heads: detections_per_img, 100),
times the batch. Layers are deduplicated by (N, C, H, W, K, R, S, stride, padding, dilation, groups); each
keeps its call count and the model:module names that produce it. --collect-only writes the layer list
(--out-dir/layers.json) and stops; --layers-json reads one instead of collecting.

Classes (tags; a layer may have several; the primary class is the first of this priority order that applies):
depthwise (groups == C > 1), grouped (1 < groups < C), dilated (dilation != 1), large-or-asymmetric (R != S
or max(R, S) >= 5), K>1024, strided (stride > 1), tiny-image (H*W <= 100), 1x1, dense-3x3 (3x3, stride 1,
groups 1, dilation 1), other.

Timing (a CUDA device): per layer, x ~ N(0,1) fp32 NCHW, W and b as nn.Conv2d initialises them (every layer
gets a bias, whether the model's conv has one or not: "bias_in_model" says), rows
  - "convred tf32" / "convred bf16" / "convred accurate": convred.nn.Conv2dReduce(reduce="min", scale=2, math=...)
    sharing W and b, as a PyTorch user runs it: values only (the module calls the amin kernel), the filter
    packed by the module on its first call (untimed), each call planned from the op's cache;
  - "torch eager tf32" (cudnn.allow_tf32 = True, PyTorch's default), "torch eager fp32" (allow_tf32 = False),
    "torch eager bf16 autocast";
  - "torch.compile tf32" and "torch.compile bf16 autocast" (default mode, dynamic=False; torch._dynamo.reset()
    before each layer; the compile, i.e. the first call, untimed and recorded as compile_s).
Each row's error: ||y - ref|| / ||ref|| over every output pixel of images 0 and N-1 (one image when N = 1),
ref = the same model in float64 (F.conv2d on the GPU in double). CUDA events around each run, the L2 flushed
before each timed run and the GPU held ~0.5 ms (torch.cuda._sleep) so that the run is enqueued before its start
event (as bench/pytorch_baseline.py), --warmup runs, median (and min) of --iters runs (fewer, at least 5, where
the warm-ups show they would take over --max-row-s; the row's "runs" says how many). Layers whose estimated
memory exceeds --mem-fraction of the free GPU memory are skipped with a reason; a row that fails (convred
status error, out of memory, compile error) records the error text and the sweep goes on.

Selection: --models (comma list of names or families: classification, segmentation, detection, all),
--limit N (the first N layers in collection order: models in order, calls in order, batches ascending),
--sample N (a class-stratified sample: round-robin over the primary classes, alternating batches, a seeded
shuffle within each class; the run order is that round-robin, so a budget stop still covers every class),
--budget-s S (stops before a layer that would likely end past S seconds of timing; what was measured is
written; the budget counts from the script's start, collection included), --no-compile, --exclude IDS,
--shard I/N (every N-th layer of the selected order, from the I-th: one process per GPU, then --merge the
sweep.json files; --gpus N does all of that), --resume SWEEP_JSON... (layers measured there are not measured
again; they are copied in, except with --shard: the remaining layers are shared out among the shards, and
--merge takes the earlier files with the new shards').

Output in --out-dir: sweep.json (environment, arguments, every layer with its rows and speed-ups, the
summary), sweep.png (speed-up of each convred precision vs PyTorch eager and vs torch.compile of the same
precision, per layer, coloured by class), and a summary by class on stdout (geomean speed-ups, layers slower
than eager, the worst rows). The JSON is rewritten every ~30 s during the run, so an interrupted run leaves
its rows. --replot sweep.json redraws the summary and PNG without a GPU.

Exit code: 0 done (rows may have failed: see the summary); 2 no CUDA device / convred missing / bad input.
"""

import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import zlib
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_baseline import set_tf32  # noqa: E402  (the TF32 switch, shared with the suite benchmark)

SCALE = 2.0
SPIN_CYCLES = 1_000_000  # ~0.5 ms at ~2 GHz (torch.cuda._sleep before each timed run)
TINY_HW = 100  # H*W at or below this: "tiny-image"
FAMILIES = ("classification", "segmentation", "detection")
# primary-class priority (the first that applies)
CLASSES = ("depthwise", "grouped", "dilated", "large-or-asymmetric", "K>1024", "strided", "tiny-image", "1x1",
           "dense-3x3", "other")
CLASS_COLOURS = {"depthwise": "#d62728", "grouped": "#ff7f0e", "dilated": "#8c564b", "large-or-asymmetric": "#e377c2",
                 "K>1024": "#9467bd", "strided": "#1f77b4", "tiny-image": "#bcbd22", "1x1": "#17becf",
                 "dense-3x3": "#2ca02c", "other": "#7f7f7f"}

# the rows: (variant, family, math / precision, cudnn.allow_tf32)
CONVRED_ROWS = (("convred tf32", "tf32"), ("convred bf16", "bf16"), ("convred accurate", "accurate"))
EAGER_TF32, EAGER_FP32, EAGER_BF16 = "torch eager tf32", "torch eager fp32", "torch eager bf16 autocast"
COMPILE_TF32, COMPILE_BF16 = "torch.compile tf32", "torch.compile bf16 autocast"
# per convred precision: (its row, eager of the same precision, torch.compile of the same precision or nearest)
COMPARE = (
    ("tf32", "convred tf32", EAGER_TF32, COMPILE_TF32),
    ("bf16", "convred bf16", EAGER_BF16, COMPILE_BF16),
    ("accurate", "convred accurate", EAGER_FP32, COMPILE_TF32),  # no fp32-accurate torch.compile peer: TF32's
)
TOL = {"tf32": 1e-3, "bf16": 1e-2, "fp32": 1e-5, "accurate": 1e-6}  # docs/tolerances.md (flagged, not fatal)


def log(*a):
    print(*a, flush=True)


# ==========================================================================================================
# Collection (torch + torchvision, CPU; no GPU needed)
# ==========================================================================================================


def model_names(tv_models):
    import torchvision.models.detection as det
    import torchvision.models.segmentation as seg

    return {"classification": list(tv_models.list_models(module=tv_models)),
            "segmentation": list(tv_models.list_models(module=seg)),
            "detection": list(tv_models.list_models(module=det))}


def select_models(spec, names):
    """(family, name) pairs for --models: 'all', family names and model names, comma-separated."""
    out = []
    fam_of = {n: f for f in FAMILIES for n in names[f]}
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        if item == "all":
            picks = [(f, n) for f in FAMILIES for n in names[f]]
        elif item in FAMILIES:
            picks = [(item, n) for n in names[item]]
        elif item in fam_of:
            picks = [(fam_of[item], item)]
        else:
            raise ValueError("--models: unknown model or family '%s' (families: all, %s; models: "
                             "torchvision.models.list_models())" % (item, ", ".join(FAMILIES)))
        out += [p for p in picks if p not in out]
    return out


def input_spec(tv_models, family, name, det_image):
    """(per-image shape (C, H, W), builder kwargs, note) for a model at its documented input size."""
    kwargs = {"weights": None}
    if family == "classification":
        w = tv_models.get_model_weights(name).DEFAULT
        crop = int(list(w.transforms().crop_size)[0])
        if name.startswith("vit_") and crop != 224:
            kwargs["image_size"] = crop  # built with weights=None a ViT takes 224 only
        return (3, crop, crop), kwargs, "%s crop_size %d" % (w, crop)
    kwargs["weights_backbone"] = None  # the builders' default would download ImageNet backbone weights
    if family == "segmentation":
        w = tv_models.get_model_weights(name).DEFAULT
        size = int(list(w.transforms().resize_size)[0])
        return (3, size, size), kwargs, "%s resize_size %d, square" % (w, size)
    return (3,) + tuple(det_image), kwargs, "a %dx%d image through the model's own transform" % tuple(det_image)


class _NoDownload:
    """Makes torch.hub's downloader raise while collecting (weights=None must not fetch anything)."""

    def __enter__(self):
        import torch.hub

        self.saved = torch.hub.load_state_dict_from_url

        def refuse(url, *a, **k):
            raise RuntimeError("torchvision_sweep: refusing to download %s (weights=None expected)" % url)

        torch.hub.load_state_dict_from_url = refuse
        try:
            import torchvision.models._api as api
            self.api, self.api_saved = api, getattr(api, "load_state_dict_from_url", None)
            if self.api_saved is not None:
                api.load_state_dict_from_url = refuse
        except ImportError:
            self.api = None
        return self

    def __exit__(self, *exc):
        import torch.hub

        torch.hub.load_state_dict_from_url = self.saved
        if self.api is not None and self.api_saved is not None:
            self.api.load_state_dict_from_url = self.api_saved
        return False


class _ParamsOnMeta:
    """Builds a model with its parameters and buffers on the meta device while everything else in __init__
    runs on the CPU (as accelerate's init_empty_weights): each parameter is moved to meta as it is
    registered, so the initialisation that follows costs nothing."""

    def __init__(self, torch):
        self.torch = torch

    def __enter__(self):
        nn = self.torch.nn
        self.reg_p, self.reg_b = nn.Module.register_parameter, nn.Module.register_buffer
        reg_p, reg_b = self.reg_p, self.reg_b

        def register_parameter(module, name, param):
            reg_p(module, name, param)
            if param is not None and param.device.type != "meta":
                p = module._parameters[name]
                module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

        def register_buffer(module, name, tensor, persistent=True):
            if tensor is not None and tensor.device.type != "meta":
                tensor = tensor.to("meta")
            reg_b(module, name, tensor, persistent=persistent)

        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer
        return self

    def __exit__(self, *exc):
        nn = self.torch.nn
        nn.Module.register_parameter, nn.Module.register_buffer = self.reg_p, self.reg_b
        return False


def _roi_rule(model, module_name):
    """(per-image N, rule text) for a detection ROI head conv (data-dependent box count), else None."""
    rh = getattr(model, "roi_heads", None)
    if rh is None or not module_name.startswith("roi_heads."):
        return None
    if module_name.startswith("roi_heads.box_head"):
        rpn = getattr(model, "rpn", None)
        n = None
        if rpn is not None:
            try:
                n = int(rpn._post_nms_top_n["testing"])
            except Exception:  # noqa: BLE001
                n = None
        return (n or 1000), "box head: rpn post_nms_top_n (testing) per image"
    if module_name.startswith(("roi_heads.mask_", "roi_heads.keypoint_")):
        return int(getattr(rh, "detections_per_img", 100)), "mask/keypoint head: detections_per_img per image"
    return None


def _run_model(torch, tv_models, family, name, shape, kwargs, batch, device):
    """Builds and runs one model on `device` at `batch`; returns (calls, error). Each call: dict of the conv's
    parameters and input shape, module name, and the ROI rule when one applies."""
    import torch.nn as nn

    calls = []
    try:
        with _NoDownload():
            if device == "meta":
                try:
                    with torch.device("meta"):
                        model = tv_models.get_model(name, **kwargs)
                except Exception:  # noqa: BLE001 - e.g. RegNet computes its widths with .tolist() in __init__
                    with _ParamsOnMeta(torch):
                        model = tv_models.get_model(name, **kwargs)
            else:
                with torch.device(device):  # parameters made and initialised there
                    model = tv_models.get_model(name, **kwargs)
    except Exception as e:  # noqa: BLE001
        return calls, "building: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
    model.eval()
    handles = []
    for mname, mod in model.named_modules():
        if not isinstance(mod, nn.Conv2d):
            continue

        def pre(m, args, mname=mname, root=model):
            x = args[0]
            calls.append({"module": mname, "x": tuple(int(v) for v in x.shape), "K": m.out_channels,
                          "R": m.kernel_size[0], "S": m.kernel_size[1], "stride": tuple(m.stride),
                          "padding": m.padding if isinstance(m.padding, str) else tuple(m.padding),
                          "dilation": tuple(m.dilation), "groups": m.groups, "bias": m.bias is not None,
                          "padding_mode": m.padding_mode, "roi": _roi_rule(root, mname)})

        handles.append(mod.register_forward_pre_hook(pre))
    err = None
    try:
        with torch.no_grad():
            if family == "detection":
                gen = torch.Generator().manual_seed(0)
                imgs = [torch.rand(shape, generator=gen).to(device) for _ in range(batch)]
                model(imgs)
            else:
                x = torch.empty((batch,) + tuple(shape), device=device)
                if device != "meta":
                    x.normal_()
                model(x)
    except Exception as e:  # noqa: BLE001
        err = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
    finally:
        for h in handles:
            h.remove()
    del model
    return calls, err


def _resolve_padding(c):
    """(pad_h, pad_w) or None when the padding cannot be expressed symmetrically."""
    p = c["padding"]
    if p == "valid":
        return (0, 0)
    if p == "same":
        tot = [d * (k - 1) for d, k in zip(c["dilation"], (c["R"], c["S"]))]
        if any(t % 2 for t in tot):
            return None
        return (tot[0] // 2, tot[1] // 2)
    return tuple(int(v) for v in p)


def out_size(n, pad, dil, k, stride):
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def layer_tags(L):
    C, H, W, K, R, S, groups = L["C"], L["H"], L["W"], L["K"], L["R"], L["S"], L["groups"]
    tags = []
    if groups > 1 and groups == C:
        tags.append("depthwise")
    if 1 < groups < C:
        tags.append("grouped")
    if tuple(L["dilation"]) != (1, 1):
        tags.append("dilated")
    if R != S or max(R, S) >= 5:
        tags.append("large-or-asymmetric")
    if K > 1024:
        tags.append("K>1024")
    if max(L["stride"]) > 1:
        tags.append("strided")
    if H * W <= TINY_HW:
        tags.append("tiny-image")
    if R == 1 and S == 1:
        tags.append("1x1")
    if R == 3 and S == 3 and groups == 1 and tuple(L["stride"]) == (1, 1) and tuple(L["dilation"]) == (1, 1):
        tags.append("dense-3x3")
    if not tags:
        tags.append("other")
    return tags


def layer_key(L):
    return (L["N"], L["C"], L["H"], L["W"], L["K"], L["R"], L["S"], tuple(L["stride"]), tuple(L["padding"]),
            tuple(L["dilation"]), L["groups"])


def layer_gflop(L):
    return 2.0 * L["N"] * L["P"] * L["Q"] * L["K"] * (L["C"] // L["groups"]) * L["R"] * L["S"] / 1e9


def layer_name(L):
    s = "n%d c%d %dx%d k%d %dx%d" % (L["N"], L["C"], L["H"], L["W"], L["K"], L["R"], L["S"])
    for key, letter, default in (("stride", "s", 1), ("padding", "p", 0), ("dilation", "d", 1)):
        a, b = L[key]
        if (a, b) != (default, default):
            s += " %s%s" % (letter, "%d" % a if a == b else "%dx%d" % (a, b))
    if L["groups"] != 1:
        s += " g%d" % L["groups"]
    return s


def collect(args):
    """The layer list (a dict for layers.json) of the models in args.models at args.batches."""
    import torch
    import torchvision
    from torchvision import models as tv_models

    names = model_names(tv_models)
    picks = select_models(args.models, names)
    batches = sorted(set(args.batches))
    fallback = args.fallback_device
    if fallback == "auto":
        fallback = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    log("collecting nn.Conv2d calls of %d models at batches %s (meta device; fallback %s at batch 1)" %
        (len(picks), ",".join(map(str, batches)), fallback))
    layers = {}  # key -> layer
    order = []
    model_info = []
    t_all = time.time()
    for mi, (family, name) in enumerate(picks):
        t0 = time.time()
        shape, kwargs, note = input_spec(tv_models, family, name, args.det_image)
        info = {"model": name, "family": family, "input": list(shape), "input_note": note, "device": "meta",
                "calls": 0, "distinct": 0, "error": None, "meta_error": None}
        per_batch = {}
        for b in batches:
            calls, err = _run_model(torch, tv_models, family, name, shape, kwargs, b, "meta")
            if err is not None:
                info["meta_error"] = err
                break
            per_batch[b] = calls
        if info["meta_error"] is not None:
            # run once for real at batch 1 (random weights), then scale N by the batch
            info["device"] = fallback
            calls1, err = _run_model(torch, tv_models, family, name, shape, kwargs, 1, fallback)
            if fallback == "cuda":
                torch.cuda.empty_cache()  # give the model's memory back (a --gpus run's shard 0 shares the GPU)
                if err is not None:  # e.g. a torchvision without CUDA ops: the CPU
                    info["cuda_error"] = err
                    info["device"] = "cpu"
                    calls1, err = _run_model(torch, tv_models, family, name, shape, kwargs, 1, "cpu")
            if err is not None:
                info["error"] = err
            per_batch = {}
            for b in batches:
                scaled = []
                for c in calls1:
                    c = dict(c)
                    c["x"] = (c["x"][0] * b,) + tuple(c["x"][1:])
                    scaled.append(c)
                per_batch[b] = scaled
        for b in batches:
            for c in per_batch[b]:
                n, C, H, W = c["x"]
                rule = None
                if c["roi"] is not None:
                    n = c["roi"][0] * b
                    rule = c["roi"][1]
                pad = _resolve_padding(c)
                L = {"N": n, "C": C, "H": H, "W": W, "K": c["K"], "R": c["R"], "S": c["S"],
                     "stride": list(c["stride"]), "padding": list(pad) if pad else [-1, -1],
                     "dilation": list(c["dilation"]), "groups": c["groups"], "batch": b}
                key = layer_key(L)
                src = "%s:%s" % (name, c["module"])
                if key not in layers:
                    L["P"] = out_size(H, L["padding"][0], L["dilation"][0], L["R"], L["stride"][0])
                    L["Q"] = out_size(W, L["padding"][1], L["dilation"][1], L["S"], L["stride"][1])
                    L["gflop"] = layer_gflop(L)
                    L["tags"] = layer_tags(L)
                    L["primary"] = L["tags"][0]
                    L.update(calls=0, models=[], sources=[], bias_in_model=False, n_rule=rule, unsupported=None)
                    if pad is None:
                        L["unsupported"] = ("padding %r is asymmetric (convred pads both sides equally)"
                                            % (c["padding"],))
                    elif c["padding_mode"] != "zeros":
                        L["unsupported"] = "padding_mode %s (convred pads with zeros)" % c["padding_mode"]
                    layers[key] = L
                    order.append(key)
                    info["distinct"] += 1
                L = layers[key]
                L["calls"] += 1
                L["bias_in_model"] = L["bias_in_model"] or c["bias"]
                if name not in L["models"]:
                    L["models"].append(name)
                if len(L["sources"]) < 6 and src not in L["sources"]:
                    L["sources"].append(src)
                info["calls"] += 1
        info["s"] = round(time.time() - t0, 2)
        model_info.append(info)
        log("  [%2d/%d] %-38s %-14s %-5s input %-13s %4d calls, %3d new layers, %5.1f s%s" % (
            mi + 1, len(picks), name, family, info["device"], "x".join(map(str, shape)), info["calls"],
            info["distinct"], info["s"], ("  ERROR " + info["error"]) if info["error"] else ""))
    out_layers = []
    for i, key in enumerate(order):
        L = layers[key]
        L["id"] = "L%04d" % i
        L["name"] = layer_name(L)
        out_layers.append(L)
    res = {"tool": "torchvision_sweep", "kind": "layers",
           "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "torch": torch.__version__, "torchvision": torchvision.__version__, "batches": batches,
           "models_arg": args.models, "det_image": list(args.det_image), "tiny_hw": TINY_HW,
           "collect_s": round(time.time() - t_all, 1), "models": model_info, "layers": out_layers}
    return res


def count_summary(layers, batches):
    """Lines: layers per batch, per primary class and per tag."""
    lines = ["%d distinct layers (%s)" % (len(layers), ", ".join(
        "batch %d: %d" % (b, sum(1 for L in layers if L["batch"] == b)) for b in batches))]
    hdr = "%-20s %8s %8s" % ("class", "primary", "tagged")
    for b in batches:
        hdr += " %9s" % ("prim n%d" % b)
    lines.append(hdr)
    for c in CLASSES:
        prim = [L for L in layers if L["primary"] == c]
        tagged = [L for L in layers if c in L["tags"]]
        if not tagged:
            continue
        s = "%-20s %8d %8d" % (c, len(prim), len(tagged))
        for b in batches:
            s += " %9d" % sum(1 for L in prim if L["batch"] == b)
        lines.append(s)
    return lines


# ==========================================================================================================
# Selection
# ==========================================================================================================


def stratified(layers, n, seed):
    """Round-robin over primary classes (in CLASSES order), within a class alternating batches, each
    (class, batch) list in a seeded shuffle; the first n of that order."""
    rng = random.Random(seed)
    buckets = {}
    for L in layers:
        buckets.setdefault(L["primary"], {}).setdefault(L["batch"], []).append(L)
    queues = []
    for c in CLASSES:
        if c not in buckets:
            continue
        per_b = []
        for b in sorted(buckets[c]):
            lst = list(buckets[c][b])
            rng.shuffle(lst)
            per_b.append(lst)
        merged = []  # alternate batches
        while any(per_b):
            for lst in per_b:
                if lst:
                    merged.append(lst.pop(0))
        queues.append(merged)
    out = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


# ==========================================================================================================
# Measurement (torch with CUDA, convred)
# ==========================================================================================================


def sync(torch, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def empty_cache(torch, dev):
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def time_cuda(torch, fn, iters, warmup, flush, dev, max_s):
    """(median ms, min ms, runs) of fn over `iters` runs, each after an L2 flush, CUDA events (as
    pytorch_baseline.py); fewer runs (at least 5) where the warm-ups show that `iters` would take more than
    max_s seconds. (On the CPU, for testing this script only: wall time.)"""
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    sync(torch, dev)
    if warmup:
        per = (time.perf_counter() - t0) / warmup
        if per * iters > max_s:
            iters = max(5, min(iters, int(max_s / per)))
    if dev.type != "cuda":
        t = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e3)
        t.sort()
        return statistics.median(t), t[0], iters
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    sleep = getattr(torch.cuda, "_sleep", None)
    for i in range(iters):
        flush.zero_()
        if sleep is not None:
            sleep(SPIN_CYCLES)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return statistics.median(t), t[0], iters


def environment(torch, convred_mod, dev):
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 60 << 20) or (60 << 20))
        device = {"name": props.name, "cc": "%d.%d" % (props.major, props.minor), "sms": props.multi_processor_count,
                  "l2_bytes": l2, "memory_bytes": props.total_memory,
                  "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    else:
        device = {"name": "cpu (a test of this script, not a measurement)", "l2_bytes": 1 << 20}
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark), "python": platform.python_version(),
           "host": platform.node(), "device": device}
    try:
        import torchvision
        env["torchvision"] = torchvision.__version__
    except ImportError:
        env["torchvision"] = None
    if convred_mod is not None:
        env["convred"] = getattr(convred_mod, "__version__", "?")
        env["convred_path"] = os.path.dirname(getattr(convred_mod, "__file__", "") or "")
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        env["git_commit"] = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                                           timeout=10).stdout.strip() or None
        env["git_dirty"] = bool(subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                                               capture_output=True, text=True, timeout=10).stdout.strip())
    except Exception:  # noqa: BLE001
        env["git_commit"] = None
    return env


def est_bytes(L):
    """A rough upper bound of the GPU memory one layer's rows need: x, a bf16 copy, the float64 reference of
    two images, and PyTorch's (N, K, P, Q) intermediates (conv output and the scaled copy, fp32; bf16 under
    autocast; torch.compile may convert x to channels_last)."""
    x = L["N"] * L["C"] * L["H"] * L["W"]
    o = L["N"] * L["K"] * L["P"] * L["Q"]
    per_img = o // max(1, L["N"])
    return 4 * x * 2 + 2 * x + 4 * o * 2 + 2 * o + 8 * per_img * 3 + 8 * (x // max(1, L["N"])) * 2


def layer_guess_s(L, recent, args):
    """Seconds the next layer will likely take: the median of the recent layers' fixed costs plus its GPU time at
    rough H200 rates (strict fp32 30 TFLOP/s, the other rows 150), each row run iters + warmup + 2 times."""
    fixed = statistics.median(recent[-20:]) if recent else 0.0
    runs = args.iters + args.warmup + 2
    return fixed + runs * L["gflop"] * (1.0 / 30e3 + 7.0 / 150e3) + runs * 8 * 0.0006


def measure(args, layers, env_extra):
    """Times every layer; returns the result dict (also written to --out-dir/sweep.json periodically)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        log("torchvision_sweep: PyTorch is needed to measure (%s)" % e)
        return None, 2
    if args.device == "cuda" and not torch.cuda.is_available():
        log("torchvision_sweep: no CUDA device; nothing to measure (use --collect-only here, or run this on the "
            "GPU machine).")
        return None, 2
    convred_mod = None
    if not args.skip_convred:
        try:
            import convred as convred_mod  # noqa: F811 - the package built from python/
        except Exception as e:  # noqa: BLE001
            log("torchvision_sweep: cannot import convred (%s: %s); build it (python/gpu_check.sh or pip install "
                "--no-build-isolation ./python) and put it on PYTHONPATH, or pass --skip-convred"
                % (type(e).__name__, e))
            return None, 2
    import torch._dynamo

    dyn = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dyn, key):
            try:
                setattr(dyn, key, max(int(getattr(dyn, key)), 64))
            except Exception:  # noqa: BLE001
                pass
    if hasattr(dyn, "fail_on_recompile_limit_hit"):
        dyn.fail_on_recompile_limit_hit = True
    torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    dev = torch.device(args.device)
    env = environment(torch, convred_mod, dev)
    env.update(env_extra)
    l2 = env["device"]["l2_bytes"]
    flush = torch.empty(max(256 << 20, 4 * l2) if dev.type == "cuda" else 1, dtype=torch.int8, device=dev)
    log("torchvision_sweep: %s, torch %s, CUDA %s, cuDNN %s, convred %s; %d layers; iters %d, warm-up %d%s%s" % (
        env["device"]["name"], env["torch"], env["cuda"], env["cudnn"], env.get("convred", "-"), len(layers),
        args.iters, args.warmup, "" if args.no_compile else ", with torch.compile",
        ", budget %.0f s" % args.budget_s if args.budget_s else ""))

    def model(x, W, b, st, pad, dil, grp):
        return torch.amin(F.conv2d(x, W, b, st, pad, dil, grp) * SCALE, dim=1, keepdim=True)

    def model_bf16(x, W, b, st, pad, dil, grp):
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            return model(x, W, b, st, pad, dil, grp)

    result = {"tool": "torchvision_sweep", "kind": "sweep",
              "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(), "env": env,
              "args": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()},
              "layers": [], "stopped": None}
    out_json = os.path.join(args.out_dir, "sweep.json")
    t_start = time.time()
    last_write = t_start
    layer_times = []  # each layer's seconds less its estimated GPU time (for the budget guess)
    margin = min(10.0, 0.05 * args.budget_s) if args.budget_s else 0.0
    compile_total = 0.0
    try:
        for li, L in enumerate(layers):
            elapsed = time.time() - args.t_proc  # the budget counts from the script's start (collection too)
            if args.budget_s:
                guess = layer_guess_s(L, layer_times, args)
                if elapsed + guess > args.budget_s - margin:
                    result["stopped"] = ("budget: %.0f s used of %.0f, %d of %d layers measured (the next would take "
                                         "~%.1f s)" % (elapsed, args.budget_s, li, len(layers), guess))
                    log("\n" + result["stopped"])
                    break
            t_layer = time.time()
            rec = dict(L)
            rec["rows"] = []
            rec["skipped"] = None
            log("\n[%d/%d %s] %s  (%.2f GFLOP; %s; tags %s; %s)" % (
                li + 1, len(layers), L["id"], L["name"], L["gflop"], L["primary"], ",".join(L["tags"]),
                ", ".join(L["sources"][:2]) + (" +%d" % (len(L["models"]) - 1) if len(L["models"]) > 1 else "")))
            if L.get("unsupported"):
                rec["skipped"] = L["unsupported"]
            elif dev.type == "cuda":
                free, _total = torch.cuda.mem_get_info()
                need = est_bytes(L)
                if need > args.mem_fraction * free:
                    rec["skipped"] = ("too large: ~%.1f GB estimated for x, PyTorch's (N, K, P, Q) intermediates and "
                                      "the reference, %.1f GB free (--mem-fraction %.2f)" % (
                                          need / 1e9, free / 1e9, args.mem_fraction))
            if rec["skipped"]:
                log("  skipped: %s" % rec["skipped"])
            else:
                compile_total += measure_layer(torch, F, args, L, rec, dev, flush, model, model_bf16, convred_mod, li)
            rec["layer_s"] = round(time.time() - t_layer, 2)
            if not rec["skipped"]:
                layer_times.append(max(0.0, rec["layer_s"] - layer_guess_s(L, [], args)))
            result["layers"].append(rec)
            lost = cuda_lost(torch) if dev.type == "cuda" else None
            if lost:
                result["stopped"] = ("the CUDA context failed after layer %s (%s): %s; rerun with --exclude %s" %
                                     (L["id"], L["name"], lost, L["id"]))
                log("\n" + result["stopped"])
                break
            empty_cache(torch, dev)
            if time.time() - last_write > 30:
                finish(result, t_start, compile_total)
                write_json(result, out_json, quiet=True)
                last_write = time.time()
    except KeyboardInterrupt:
        result["stopped"] = "interrupted (KeyboardInterrupt) after %d layers" % len(result["layers"])
        log("\n" + result["stopped"])
    finish(result, t_start, compile_total)
    result["not_measured"] = len(layers) - len(result["layers"])
    return result, 0


def cuda_lost(torch):
    """The error text if the CUDA context is broken (a sticky error such as an illegal address), else None."""
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return None
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])


def finish(result, t_start, compile_total):
    result["wall_s"] = round(time.time() - t_start, 1)
    result["compile_s_total"] = round(compile_total, 1)
    finish_summary(result)


def finish_summary(result):
    for rec in result["layers"]:
        add_speedups(rec)
    result["summary"] = summarize(result["layers"])


def layer_seed(seed, layer_id):
    """The data seed of a layer: seed + the number of a collected layer's id ("L123"), or seed + a CRC-32 of
    any other id (the suite's, e.g. "S00nt"), so that every layer gets the same data in any run."""
    digits = layer_id[1:]
    return seed + (int(digits) if digits.isdigit() else zlib.crc32(layer_id.encode()))


def measure_layer(torch, F, args, L, rec, dev, flush, model, model_bf16, convred_mod, li):
    """Fills rec["rows"]; returns the compile seconds spent."""
    import torch._dynamo

    compile_s = 0.0
    N, C, H, W, K, R, S = L["N"], L["C"], L["H"], L["W"], L["K"], L["R"], L["S"]
    st, pad, dil, grp = tuple(L["stride"]), tuple(L["padding"]), tuple(L["dilation"]), L["groups"]
    x = Wt = b = ref = None
    try:
        torch.manual_seed(layer_seed(args.seed, L["id"]))  # by layer id: the same data in any selection or shard
        x = torch.randn(N, C, H, W, device=dev)
        conv = torch.nn.Conv2d(C, K, (R, S), stride=st, padding=pad, dilation=dil, groups=grp, device=dev)
        Wt, b = conv.weight.detach().contiguous(), conv.bias.detach().contiguous()
        del conv
        imgs = sorted({0, N - 1})
        with torch.no_grad():
            try:
                xr = x[imgs].double()
                ref = torch.amin(F.conv2d(xr, Wt.double(), b.double(), st, pad, dil, grp) * SCALE, dim=1, keepdim=True)
                sync(torch, dev)
            except RuntimeError:  # no float64 kernel for this conv on the GPU: the CPU's
                xr = x[imgs].double().cpu()
                ref = torch.amin(F.conv2d(xr, Wt.double().cpu(), b.double().cpu(), st, pad, dil, grp) * SCALE, dim=1,
                                 keepdim=True).to(dev)
            del xr
        sync(torch, dev)
    except Exception as e:  # noqa: BLE001
        rec["skipped"] = "setup failed: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
        log("  " + rec["skipped"])
        x = Wt = b = ref = None
        empty_cache(torch, dev)
        return 0.0
    rec["error_images"] = imgs

    variants = []  # (variant, family, precision, tf32 flag, fn or factory)
    if convred_mod is not None:
        for vname, m in CONVRED_ROWS:
            variants.append((vname, "convred", m, True, ("convred", m)))
    variants += [(EAGER_TF32, "pytorch-eager", "tf32", True, lambda: model(x, Wt, b, st, pad, dil, grp)),
                 (EAGER_FP32, "pytorch-eager", "fp32", False, lambda: model(x, Wt, b, st, pad, dil, grp)),
                 (EAGER_BF16, "pytorch-eager", "bf16", True, lambda: model_bf16(x, Wt, b, st, pad, dil, grp))]
    if not args.no_compile:
        torch._dynamo.reset()  # one compiled graph per function at a time: a fresh cache for this layer
        ct = torch.compile(model, dynamic=False)
        cb = torch.compile(model_bf16, dynamic=False)
        variants += [(COMPILE_TF32, "pytorch-compile", "tf32", True, lambda: ct(x, Wt, b, st, pad, dil, grp)),
                     (COMPILE_BF16, "pytorch-compile", "bf16", True, lambda: cb(x, Wt, b, st, pad, dil, grp))]
    for vname, family, prec, tf32, fn in variants:
        r = {"variant": vname, "family": family, "precision": prec, "ms": None, "ms_min": None, "tflops": None,
             "rel_err": None, "tolerance": TOL.get(prec), "above_tolerance": False, "error": None}
        mod = None
        try:
            set_tf32(torch, tf32)
            with torch.no_grad():
                if family == "convred":
                    mod = convred_mod.nn.Conv2dReduce(C, K, (R, S), stride=st, padding=pad, dilation=dil, groups=grp,
                                                      bias=True, scale=SCALE, reduce="min", math=prec, device=dev)
                    mod.weight.copy_(Wt)
                    mod.bias.copy_(b)
                    fn = (lambda mod=mod: mod(x))
                    try:
                        r["kernel"] = mod.kernel_for(x)
                    except Exception as e:  # noqa: BLE001
                        r["kernel"] = "describe failed: %s" % e
                t0 = time.time()
                y = fn()  # the checked run: packs the filter (convred) or compiles (torch.compile), untimed
                sync(torch, dev)
                first = time.time() - t0
                if family == "pytorch-compile":
                    r["compile_s"] = round(first, 2)
                    compile_s += first
                if family == "convred":
                    r["packed_bytes"] = int(mod._packed[2].numel()) if mod._packed is not None else 0
                got = y[imgs].double()
                if bool(torch.isfinite(got).all()) or not bool(torch.isfinite(ref).all()):
                    den = float(torch.linalg.vector_norm(ref))
                    diff = float(torch.linalg.vector_norm(torch.nan_to_num(got - ref)))
                    r["rel_err"] = diff / den if den > 0 else diff
                else:  # timed all the same, but the row counts as failed (no speed-up from a wrong result)
                    r["error"] = "non-finite output where the float64 reference is finite"
                del y, got
                ms, ms_min, runs = time_cuda(torch, fn, args.iters, args.warmup, flush, dev, args.max_row_s)
            r.update(ms=ms, ms_min=ms_min, runs=runs, tflops=L["gflop"] / ms)  # GFLOP / ms = TFLOP/s
            if r["tolerance"] is not None and r["rel_err"] is not None and not (r["rel_err"] <= r["tolerance"]):
                r["above_tolerance"] = True
            print("  %-28s %9.4f ms  err %s%s%s%s" % (
                vname, ms, fmt(r["rel_err"], "%.1e"), "  ABOVE TOLERANCE" if r["above_tolerance"] else "",
                ("  FAILED: " + r["error"]) if r["error"] else "",
                ("  [%s]" % r["kernel"][:70]) if r.get("kernel") else ""), flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is a row
            r["error"] = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:600])
            r["ms"] = r["ms_min"] = None
            print("  %-28s FAILED: %s" % (vname, r["error"][:200]), flush=True)
            if args.verbose:
                traceback.print_exc(limit=4)
        finally:
            set_tf32(torch, True)
            mod = None
        rec["rows"].append(r)
        empty_cache(torch, dev)
    if not args.no_compile:
        torch._dynamo.reset()
    x = Wt = b = ref = None
    return compile_s


def write_json(result, path, quiet=False):
    """Writes result to path (through a temporary file): indented, except that each element of the
    "layers" list takes one line (layers.json holds thousands)."""
    tmp = path + ".tmp"
    parts = []
    for k, v in result.items():
        if isinstance(v, list) and v and all(isinstance(e, dict) for e in v):  # layers, models: one line each
            if k == "layers":  # the rows without their empty fields (readers use .get)
                v = [dict(e, rows=[{a: b for a, b in r.items() if b is not None and b is not False}
                                   for r in e["rows"]]) if "rows" in e else e for e in v]
            body = ",\n".join("  " + json.dumps(e, allow_nan=True, separators=(",", ":")) for e in v)
            parts.append(" %s: [\n%s\n ]" % (json.dumps(k), body))
        else:
            parts.append(" %s: %s" % (json.dumps(k), json.dumps(v, indent=1, allow_nan=True).replace("\n", "\n ")))
    with open(tmp, "w") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")
    os.replace(tmp, path)
    if not quiet:
        log("wrote %s" % path)


# ==========================================================================================================
# Speed-ups, summary, chart (no torch needed)
# ==========================================================================================================


def row(rec, variant):
    for r in rec.get("rows", []):
        if r.get("variant") == variant and isinstance(r.get("ms"), (int, float)) and r["ms"] > 0 and not r.get("error"):
            return r
    return None


def add_speedups(rec):
    """rec["speedups"][precision] = {vs_eager, vs_compile, vs_eager_tf32 (accurate only)}: peer ms / convred ms."""
    sp = {}
    for prec, mine, eager, comp in COMPARE:
        m = row(rec, mine)
        if m is None:
            continue
        e, c, e32 = row(rec, eager), row(rec, comp), row(rec, EAGER_TF32)
        d = {"ms": m["ms"], "vs_eager": e["ms"] / m["ms"] if e else None,
             "vs_compile": c["ms"] / m["ms"] if c else None, "kernel": m.get("kernel"), "rel_err": m.get("rel_err")}
        if prec == "accurate":
            d["vs_eager_tf32"] = e32["ms"] / m["ms"] if e32 else None
        sp[prec] = d
    rec["speedups"] = sp


def geomean(v):
    v = [x for x in v if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def summarize(recs):
    """Per precision and primary class (and per tag): layers, geomean vs eager and vs compile, counts slower,
    the worst rows; failed and skipped rows."""
    out = {"layers": len(recs), "measured": sum(1 for r in recs if any(x.get("ms") for x in r.get("rows", []))),
           "skipped": [{"id": r["id"], "name": r["name"], "why": r["skipped"]} for r in recs if r.get("skipped")],
           "failed_rows": [], "precisions": {}}
    for r in recs:
        for x in r.get("rows", []):
            if x.get("error"):
                out["failed_rows"].append({"id": r["id"], "name": r["name"], "variant": x["variant"],
                                           "error": x["error"][:300]})
    for prec, mine, eager, comp in COMPARE:
        ents = []
        for r in recs:
            s = (r.get("speedups") or {}).get(prec)
            if s:
                ents.append((r, s))

        def block(sel):
            ve = [s["vs_eager"] for _, s in sel if s.get("vs_eager")]
            vc = [s["vs_compile"] for _, s in sel if s.get("vs_compile")]
            d = {"layers": len(sel), "geomean_vs_eager": geomean(ve), "geomean_vs_compile": geomean(vc),
                 "slower_than_eager": sum(1 for x in ve if x < 1.0),
                 "slower_than_compile": sum(1 for x in vc if x < 1.0),
                 "with_eager": len(ve), "with_compile": len(vc)}
            if prec == "accurate":
                v32 = [s["vs_eager_tf32"] for _, s in sel if s.get("vs_eager_tf32")]
                d["geomean_vs_eager_tf32"] = geomean(v32)
                d["slower_than_eager_tf32"] = sum(1 for x in v32 if x < 1.0)
            return d

        p = {"convred": mine, "eager": eager, "compile": comp, "all": block(ents), "by_class": {}, "by_tag": {},
             "by_batch": {}}
        for c in CLASSES:
            sel = [(r, s) for r, s in ents if r["primary"] == c]
            if sel:
                p["by_class"][c] = block(sel)
            sel = [(r, s) for r, s in ents if c in r["tags"]]
            if sel:
                p["by_tag"][c] = block(sel)
        for bt in sorted({r["batch"] for r, _ in ents}):
            p["by_batch"][str(bt)] = block([(r, s) for r, s in ents if r["batch"] == bt])
        worst = sorted([(r, s) for r, s in ents if s.get("vs_eager")], key=lambda e: e[1]["vs_eager"])[:10]
        p["worst_vs_eager"] = [{"id": r["id"], "name": r["name"], "primary": r["primary"], "speedup": s["vs_eager"],
                                "ms": s["ms"], "kernel": (s.get("kernel") or "")[:120], "sources": r["sources"][:2]}
                               for r, s in worst]
        worst = sorted([(r, s) for r, s in ents if s.get("vs_compile")], key=lambda e: e[1]["vs_compile"])[:10]
        p["worst_vs_compile"] = [{"id": r["id"], "name": r["name"], "primary": r["primary"],
                                  "speedup": s["vs_compile"], "ms": s["ms"], "kernel": (s.get("kernel") or "")[:120],
                                  "sources": r["sources"][:2]} for r, s in worst]
        p["above_tolerance"] = [{"id": r["id"], "name": r["name"], "rel_err": s.get("rel_err")} for r, s in ents
                                if s.get("rel_err") is not None and TOL.get(prec) and s["rel_err"] > TOL[prec]]
        out["precisions"][prec] = p
    return out


def fmt(v, f="%.2f", na="-"):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return na
    return f % v


def print_summary(result):
    sm = result.get("summary") or summarize(result.get("layers", []))
    env = result.get("env") or {}
    log("\n## torchvision sweep: %d layers measured of %d listed%s (%s)" % (
        sm["measured"], sm["layers"] + result.get("not_measured", 0),
        ("; stopped: " + result["stopped"]) if result.get("stopped") else "",
        (env.get("device") or {}).get("name", "?")))
    for prec, p in sm["precisions"].items():
        extra = prec == "accurate"
        log("\n### convred %s vs %s and %s" % (prec, p["eager"], p["compile"]) +
            (" (no fp32-accurate torch.compile: the TF32 one); also vs eager TF32" if extra else ""))
        hdr = "| class | layers | x eager (geomean) | slower than eager | x compile (geomean) | slower than compile |"
        sep = "|---|---:|---:|---:|---:|---:|"
        if extra:
            hdr += " x eager tf32 | slower than eager tf32 |"
            sep += "---:|---:|"
        log(hdr)
        log(sep)
        lines = [(c, d) for c, d in p["by_class"].items()] + [("**all**", p["all"])]
        for c, d in lines:
            s = "| %s | %d | %s | %d | %s | %d |" % (c, d["layers"], fmt(d["geomean_vs_eager"], "%.2fx"),
                                                    d["slower_than_eager"], fmt(d["geomean_vs_compile"], "%.2fx"),
                                                    d["slower_than_compile"])
            if extra:
                s += " %s | %d |" % (fmt(d.get("geomean_vs_eager_tf32"), "%.2fx"), d.get("slower_than_eager_tf32", 0))
            log(s)
        bb = ", ".join("batch %s: x eager %s, x compile %s" % (b, fmt(d["geomean_vs_eager"], "%.2f"),
                                                               fmt(d["geomean_vs_compile"], "%.2f"))
                       for b, d in p["by_batch"].items())
        if bb:
            log("by batch: " + bb)
        tags = "; ".join("%s %d: %s / %s" % (c, d["layers"], fmt(d["geomean_vs_eager"], "%.2f"),
                                             fmt(d["geomean_vs_compile"], "%.2f")) for c, d in p["by_tag"].items())
        if tags:
            log("by tag (any layer carrying it; layers: x eager / x compile): " + tags)
        if p["worst_vs_eager"]:
            log("worst vs eager: " + "; ".join("%s %s [%s] %.2fx (%s)" % (
                e["id"], e["name"], e["primary"], e["speedup"], e["kernel"].split(" (")[0] or "?")
                for e in p["worst_vs_eager"][:6]))
        if p["worst_vs_compile"]:
            log("worst vs compile: " + "; ".join("%s %s [%s] %.2fx" % (e["id"], e["name"], e["primary"], e["speedup"])
                                                 for e in p["worst_vs_compile"][:6]))
        if p["above_tolerance"]:
            log("above tolerance %.0e: %s" % (TOL[prec], ", ".join("%s %.1e" % (e["id"], e["rel_err"] or float("nan"))
                                                                   for e in p["above_tolerance"][:20])))
    if sm["skipped"]:
        log("\nskipped layers (%d): %s" % (len(sm["skipped"]), "; ".join(
            "%s %s: %s" % (e["id"], e["name"], e["why"][:100]) for e in sm["skipped"][:20])))
    if sm["failed_rows"]:
        log("\nfailed rows (%d):" % len(sm["failed_rows"]))
        for e in sm["failed_rows"][:40]:
            log("  %s %s %s: %s" % (e["id"], e["name"], e["variant"], e["error"][:160]))


def print_estimate(result, listed):
    """From this run's per-layer seconds (by primary class), the time all `listed` layers would take."""
    done = [r for r in result.get("layers", []) if not r.get("skipped") and r.get("layer_s")]
    if not done or not listed:
        return
    allmean = statistics.mean(r["layer_s"] for r in done)
    per = {}
    for r in done:
        per.setdefault(r["primary"], []).append(r["layer_s"])
    tot = sum(statistics.mean(per[L["primary"]]) if L["primary"] in per else allmean for L in listed)
    log("\nper-layer time in this run: mean %.2f s (%s); all %d listed layers at these rates: ~%.1f min on one GPU "
        "(collection not included)" % (allmean, ", ".join("%s %.2f" % (c, statistics.mean(v)) for c, v in per.items()),
                                       len(listed), tot / 60.0))
    result["estimate_all_listed_s"] = round(tot)


def merge(paths):
    """One result from several sweep.json (e.g. the shards of one run): layers by id (first wins)."""
    out, seen = None, set()
    for pth in paths:
        with open(pth) as f:
            r = json.load(f)
        if out is None:
            out = {k: v for k, v in r.items() if k not in ("layers", "summary")}
            out["layers"], out["merged_from"], out["stopped"], out["not_measured"] = [], [], None, 0
        out["merged_from"].append({"path": pth, "layers": len(r.get("layers", [])), "stopped": r.get("stopped"),
                                   "wall_s": r.get("wall_s"), "host": (r.get("env") or {}).get("host")})
        for L in r.get("layers", []):
            if L["id"] not in seen:
                seen.add(L["id"])
                out["layers"].append(L)
    out["layers"].sort(key=lambda L: L["id"])
    # the parts' own stops are in merged_from; what is missing is against the whole layer list
    listed = (out.get("env") or {}).get("layers_listed")
    out["not_measured"] = max(0, listed - len(out["layers"])) if listed else 0
    for rec in out["layers"]:
        add_speedups(rec)
    out["summary"] = summarize(out["layers"])
    return out


def plot(result, path):
    try:
        import matplotlib
    except ImportError:
        log("plot: matplotlib is not installed here, no PNG written; redraw it elsewhere with\n"
            "  python3 bench/torchvision_sweep.py --replot sweep.json --out-dir DIR")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    recs = [r for r in result.get("layers", []) if r.get("speedups")]
    if not recs:
        log("plot: no measured layers; no chart written")
        return False
    sm = result.get("summary") or summarize(result["layers"])
    fig, axes = plt.subplots(3, 2, figsize=(15, 13), sharex=True)
    bmax = max(r["batch"] for r in recs)
    for i, (prec, mine, eager, comp) in enumerate(COMPARE):
        for j, (key, peer) in enumerate((("vs_eager", eager), ("vs_compile", comp))):
            ax = axes[i][j]
            ys = []
            for c in CLASSES:
                pts = [(r["gflop"], r["speedups"][prec][key], r["batch"]) for r in recs
                       if r["primary"] == c and prec in r["speedups"] and r["speedups"][prec].get(key)]
                for marker, sel in (("o", [p for p in pts if p[2] == 1]), ("^", [p for p in pts if p[2] != 1])):
                    if sel:
                        ax.scatter([p[0] for p in sel], [p[1] for p in sel], s=14, marker=marker, alpha=0.75,
                                   color=CLASS_COLOURS[c], edgecolors="none")
                ys += [p[1] for p in pts]
            ax.axhline(1.0, color="black", lw=0.8)
            gm = sm["precisions"].get(prec, {}).get("all", {}).get("geomean_" + key)
            if gm:
                ax.axhline(gm, color="#444444", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%gx" % float("%.2g" % v)))
            ax.yaxis.set_minor_formatter(NullFormatter())
            if ys:
                lo, hi = min(min(ys), 1.0), max(max(ys), 1.0)
                ax.set_ylim(lo / 1.3, hi * 1.3)
            else:
                ax.text(0.5, 0.5, "no rows (%s)" % ("--no-compile" if "compile" in peer else "none measured"),
                        transform=ax.transAxes, ha="center", va="center", color="#888888")
            n_slow = sum(1 for y in ys if y < 1.0)
            ax.set_title("convred %s vs %s: geomean %s, %d of %d slower" % (prec, peer, fmt(gm, "%.2fx"), n_slow,
                                                                             len(ys)), fontsize=9)
            ax.set_ylabel("speed-up (peer ms / convred ms, log)", fontsize=8)
            ax.grid(which="both", alpha=0.25)
            if i == 2:
                ax.set_xlabel("layer GFLOP (2 N P Q K C/g R S; log)", fontsize=8)
    handles = [Line2D([], [], ls="", marker="s", color=CLASS_COLOURS[c], label=c) for c in CLASSES
               if any(r["primary"] == c for r in recs)]
    handles += [Line2D([], [], ls="", marker="o", color="#555555", label="batch 1"),
                Line2D([], [], ls="", marker="^", color="#555555", label="batch %d" % bmax),
                Line2D([], [], color="#444444", ls="--", label="geomean")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 7), fontsize=8, frameon=False)
    env = result.get("env") or {}
    fig.suptitle("torchvision sweep: y = amin_k(2 conv2d(x, W, b)), %d layers on %s (colour: primary class)%s" % (
        len(recs), (env.get("device") or {}).get("name", "GPU"),
        "; " + result["stopped"] if result.get("stopped") else ""),
        fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log("wrote %s" % path)
    return True


# ==========================================================================================================
# main
# ==========================================================================================================


def run_gpus(args, layers_path, layers):
    """--gpus N: one child process per GPU (CUDA_VISIBLE_DEVICES, --shard i/N, out-dir/shard<i>/, log
    out-dir/shard<i>.log), the budget less the time spent so far and 20 s for the merge; then the shards' and
    --resume's sweep.json merged into out-dir/sweep.json and sweep.png."""
    n = args.gpus
    visible = None
    if args.device == "cuda":
        try:
            import torch
            count = torch.cuda.device_count()
        except ImportError:
            count = 0
        if count < n:
            log("torchvision_sweep: --gpus %d but %d CUDA devices are visible" % (n, count))
            return 2
        env_vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        visible = [v.strip() for v in env_vis.split(",")] if env_vis else [str(i) for i in range(count)]
    common = ["--layers-json", os.path.abspath(layers_path), "--seed", str(args.seed), "--iters", str(args.iters),
              "--warmup", str(args.warmup), "--max-row-s", str(args.max_row_s), "--mem-fraction",
              str(args.mem_fraction), "--device", args.device]
    if args.classes:
        common += ["--classes", args.classes]
    if args.sample:
        common += ["--sample", str(args.sample)]
    elif args.limit:
        common += ["--limit", str(args.limit)]
    for flag, on in (("--no-compile", args.no_compile), ("--skip-convred", args.skip_convred),
                     ("--cudnn-benchmark", args.cudnn_benchmark), ("--verbose", args.verbose)):
        if on:
            common.append(flag)
    if args.exclude:
        common += ["--exclude", args.exclude]
    if args.resume:
        common += ["--resume"] + [os.path.abspath(p) for p in args.resume]
    if args.budget_s:
        left = args.budget_s - (time.time() - args.t_proc) - 20.0
        if left < 30:
            log("torchvision_sweep: %.0f s of --budget-s left after the collection: nothing measured" % (left + 20))
            return 0
        common += ["--budget-s", "%.0f" % left]
    procs = []
    for i in range(n):
        out_i = os.path.join(args.out_dir, "shard%d" % i)
        env = dict(os.environ)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible[i]
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # one small graph per compile: no worker pool each
        logf = open(os.path.join(args.out_dir, "shard%d.log" % i), "w")
        cmd = [sys.executable, os.path.abspath(__file__)] + common + ["--shard", "%d/%d" % (i, n), "--out-dir", out_i]
        procs.append((i, subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env), logf, out_i))
    log("started %d shard processes (logs: %s/shard<i>.log)" % (n, args.out_dir))
    rcs = []
    for i, p, logf, _ in procs:
        rcs.append(p.wait())
        logf.close()
        log("  shard %d/%d: rc %d" % (i, n, rcs[-1]))
    parts = list(args.resume or []) + [os.path.join(o, "sweep.json") for _, _, _, o in procs
                                       if os.path.exists(os.path.join(o, "sweep.json"))]
    if not parts:
        log("torchvision_sweep: no shard wrote a sweep.json (see the shard logs)")
        return 1
    result = merge(parts)
    result["gpus"] = n
    write_json(result, os.path.join(args.out_dir, "sweep.json"))
    print_summary(result)
    print_estimate(result, layers)
    plot(result, os.path.join(args.out_dir, "sweep.png"))
    return 0 if all(rc == 0 for rc in rcs) else 1


def parse_hw(s):
    parts = s.lower().replace(",", "x").split("x")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError("expected HxW, e.g. 480x640")
    return (int(parts[0]), int(parts[1]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=os.environ.get("OUT") or "sweep_out",
                    help="where layers.json, sweep.json and sweep.png go ($OUT, else ./sweep_out)")
    ap.add_argument("--models", default="all", help="comma list of models and/or families (classification, "
                    "segmentation, detection) or 'all' (default)")
    ap.add_argument("--batches", default="1,32", help="batch sizes (default 1,32)")
    ap.add_argument("--det-image", type=parse_hw, default=(480, 640), help="detection input image HxW before the "
                    "model's own resize (default 480x640)")
    ap.add_argument("--fallback-device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="where models that fail on the meta device run at batch 1 (auto: cuda if present, else cpu)")
    ap.add_argument("--collect-only", action="store_true", help="write out-dir/layers.json and stop (no GPU needed)")
    ap.add_argument("--layers-json", default=None, help="read the layer list from this file instead of collecting")
    ap.add_argument("--classes", default="", help="comma list of classes (primary or tag, e.g. dilated,depthwise): "
                    "only layers carrying one of them")
    ap.add_argument("--limit", type=int, default=0, help="only the first N layers in collection order")
    ap.add_argument("--sample", type=int, default=0, help="a class-stratified sample of N layers, run round-robin "
                    "over classes (N >= the layer count: all layers in that order)")
    ap.add_argument("--seed", type=int, default=2026, help="sample and data seed (2026)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop before a layer that would likely end past "
                    "this many seconds of measuring (0: no budget); what was measured is written")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--skip-convred", action="store_true", help="PyTorch rows only (convred not importable)")
    ap.add_argument("--iters", type=int, default=20, help="timed runs per row, median (20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (3)")
    ap.add_argument("--max-row-s", type=float, default=5.0, help="fewer timed runs (at least 5) for a row whose "
                    "--iters runs would take longer than this, judged from the warm-ups (5 s)")
    ap.add_argument("--mem-fraction", type=float, default=0.8, help="skip a layer whose estimated memory exceeds "
                    "this fraction of the free GPU memory (0.8)")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True "
                    "(default False, PyTorch's default)")
    ap.add_argument("--resume", nargs="+", default=None, metavar="SWEEP_JSON", help="earlier sweep.json files "
                    "(e.g. a budgeted run's): their layers are not measured again and (except with --shard, where "
                    "--merge takes the earlier files too) are copied into this run's sweep.json")
    ap.add_argument("--gpus", type=int, default=1, help="N > 1: one process per GPU (each a --shard), the results "
                    "merged into out-dir (the shards' own in out-dir/shard<i>/)")
    ap.add_argument("--exclude", default="", help="comma list of layer ids (L0123) not to measure")
    ap.add_argument("--shard", default=None, metavar="I/N", help="measure only every N-th layer of the selected "
                    "order, starting at the I-th (0-based): one process per GPU, then --merge")
    ap.add_argument("--replot", default=None, metavar="SWEEP_JSON", help="no measuring: summary and PNG from an "
                    "earlier sweep.json")
    ap.add_argument("--merge", nargs="+", default=None, metavar="SWEEP_JSON", help="no measuring: merge several "
                    "sweep.json (e.g. shards) into out-dir/sweep.json and sweep.png")
    ap.add_argument("--verbose", action="store_true", help="tracebacks of failed rows")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # "cpu": tests this script's flow only
    args = ap.parse_args(argv)
    args.t_proc = time.time()
    try:
        args.batches = sorted({int(b) for b in args.batches.split(",") if b.strip()})
        if not args.batches or min(args.batches) < 1:
            raise ValueError
    except ValueError:
        ap.error("--batches: comma list of positive integers")
    if args.iters < 1 or args.warmup < 0 or args.limit < 0 or args.sample < 0:
        ap.error("--iters >= 1, --warmup >= 0, --limit >= 0, --sample >= 0")
    if args.limit and args.sample:
        ap.error("--limit and --sample: one or the other")
    if args.gpus < 1 or (args.gpus > 1 and args.shard):
        ap.error("--gpus >= 1, and not with --shard")
    shard = None
    if args.shard:
        try:
            i, n = (int(v) for v in args.shard.split("/"))
            if not 0 <= i < n:
                raise ValueError
            shard = (i, n)
        except ValueError:
            ap.error("--shard I/N with 0 <= I < N")
    os.makedirs(args.out_dir, exist_ok=True)

    if args.merge:
        result = merge(args.merge)
        write_json(result, os.path.join(args.out_dir, "sweep.json"))
        print_summary(result)
        plot(result, os.path.join(args.out_dir, "sweep.png"))
        return 0
    if args.replot:
        with open(args.replot) as f:
            result = json.load(f)
        if not result.get("summary"):
            for rec in result.get("layers", []):
                add_speedups(rec)
            result["summary"] = summarize(result.get("layers", []))
        print_summary(result)
        plot(result, os.path.join(args.out_dir, "sweep.png"))
        return 0

    # the layer list
    if args.layers_json:
        try:
            with open(args.layers_json) as f:
                lj = json.load(f)
        except (OSError, ValueError) as e:
            log("torchvision_sweep: cannot read --layers-json %s: %s" % (args.layers_json, e))
            return 2
        layers = lj["layers"]
        batches = lj.get("batches", sorted({L["batch"] for L in layers}))
        log("read %d layers from %s" % (len(layers), args.layers_json))
    else:
        try:
            import torchvision  # noqa: F401 - checked here, used by collect()
        except ImportError as e:
            log("torchvision_sweep: torchvision is needed to collect the layers (%s); or pass --layers-json" % e)
            return 2
        try:
            lj = collect(args)
        except ValueError as e:
            ap.error(str(e))
        layers, batches = lj["layers"], lj["batches"]
        path = os.path.join(args.out_dir, "layers.json")
        write_json(lj, path)
        failed = [m for m in lj["models"] if m["error"]]
        log("collected in %.1f s; models run on the fallback device: %s" % (
            lj["collect_s"], ", ".join(m["model"] for m in lj["models"] if m["device"] != "meta") or "none"))
        if failed:
            log("models whose forward raised (their convs up to the error are kept): %s" % "; ".join(
                "%s: %s" % (m["model"], m["error"][:120]) for m in failed))
    for line in count_summary(layers, batches):
        log(line)
    if args.collect_only:
        return 0
    if args.gpus > 1:
        return run_gpus(args, args.layers_json or os.path.join(args.out_dir, "layers.json"), layers)

    if args.classes:
        wanted = {c.strip() for c in args.classes.split(",") if c.strip()}
        layers = [L for L in layers if L.get("primary") in wanted or wanted & set(L.get("tags") or [])]
        log("--classes %s: %d layers" % (",".join(sorted(wanted)), len(layers)))
    if args.sample:
        sel = stratified(layers, args.sample, args.seed)
        how = "a class-stratified sample of %d (seed %d)" % (len(sel), args.seed)
    elif args.limit:
        sel = layers[:args.limit]
        how = "the first %d in collection order" % len(sel)
    else:
        sel = list(layers)
        how = "all %d" % len(sel)
    excl = {e.strip() for e in args.exclude.split(",") if e.strip()}
    resumed = []
    if args.resume:
        ids = {L["id"]: L for L in layers}
        seen = set()
        for pth in args.resume:
            try:
                with open(pth) as f:
                    prev = json.load(f)
            except (OSError, ValueError) as e:
                log("torchvision_sweep: cannot read --resume %s: %s" % (pth, e))
                return 2
            for rec in prev.get("layers", []):
                if rec["id"] in seen:
                    continue
                if rec["id"] not in ids or layer_key(ids[rec["id"]]) != layer_key(rec):
                    log("torchvision_sweep: --resume %s: layer %s is not this layer list's %s (another collection?)" %
                        (pth, rec["id"], rec["id"]))
                    return 2
                seen.add(rec["id"])
                resumed.append(rec)
        sel = [L for L in sel if L["id"] not in seen]
        how += ", less %d measured before (--resume)" % len(seen)
    if excl:
        sel = [L for L in sel if L["id"] not in excl]
        how += ", less %d excluded" % len(excl)
    if shard:
        sel = sel[shard[0]::shard[1]]
        how += ", shard %d/%d: %d layers" % (shard[0], shard[1], len(sel))
    log("measuring %s" % how)
    result, rc = measure(args, sel, {"selection": how, "layers_listed": len(layers),
                                     "collection": {k: lj.get(k) for k in ("torchvision", "batches", "det_image",
                                                                           "models_arg", "collect_s", "tiny_hw")},
                                     "collection_models": lj.get("models")})
    if result is None:
        return rc
    if resumed:
        result["resumed_from"] = list(args.resume)
    if resumed and not shard:  # a shard leaves them out: --merge the earlier files with the shards' instead
        result["layers"] = resumed + result["layers"]
        finish_summary(result)
    try:
        write_json(result, os.path.join(args.out_dir, "sweep.json"))
    except Exception as e:  # noqa: BLE001
        log("torchvision_sweep: writing results failed: %s" % e)
        return 1
    print_summary(result)
    print_estimate(result, layers)
    write_json(result, os.path.join(args.out_dir, "sweep.json"), quiet=True)  # with the estimate
    try:
        plot(result, os.path.join(args.out_dir, "sweep.png"))
    except Exception as e:  # noqa: BLE001
        log("torchvision_sweep: the chart failed: %s" % e)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
