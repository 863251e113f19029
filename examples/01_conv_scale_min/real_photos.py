#!/usr/bin/env python3
"""Example 01 on real photographs: y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True).

Runs on the GPU machine (python3 with PyTorch, NumPy and scikit-image; no network needed):

  1. builds a batch x from the photographs that ship inside scikit-image (skimage.data: astronaut,
     coffee, chelsea, rocket, ...): each is resized (shorter side) and centre-cropped to SIZE x SIZE,
     scaled to [0, 1] and normalised with the ImageNet mean/std, giving (N, 3, SIZE, SIZE);
  2. makes C = 64 channels like the seed case with a fixed "stem": a random-but-fixed 1x1 conv 3 -> 64
     (torch.nn.Conv2d's init, torch.manual_seed) followed by ReLU, computed in float64 and rounded to
     float32 once -- i.e. x is the kind of post-activation feature map the seed layer sees in a CNN.
     (--channels 3 skips the stem and runs the conv as a first layer on the RGB input instead.)
  3. creates W (128, C, 3, 3) and b (128) as torch.nn.Conv2d does (kaiming-uniform, +-1/sqrt(C*3*3)),
     with torch.manual_seed(SEED);
  4. computes y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True).values
       - in float64 (the reference; from the same float32 x, W, b), and
       - in PyTorch's default mode: float32 tensors on CUDA, where cuDNN may use TF32 for the conv
         (torch.backends.cudnn.allow_tf32 is True by default; this script leaves the flags alone);
  5. saves x, W, b as float32 .npy in OUT (default ./real_input), runs the example binary (default
     build/examples/01_conv_scale_min) with --x/--weights/--b/--y-out, loads its y and prints the max-abs,
     max-relative and relative-norm (||a-b|| / ||b||) errors of
       (a) convred vs float64, (b) PyTorch default vs float64, (c) convred vs PyTorch default,
     and the example's Passed/Failed line. convred runs the example's default math, math::accurate
     (its "math" and "kernel" lines say which kernel ran); pass e.g. -- --math tf32 for another.

Exit code: the example's (0 only when it printed Passed), 1 if its output is missing or unreadable.
Arguments after "--" are passed to the example (e.g. -- --layout nhwc --iters 100).
"""
import argparse
import os
import subprocess
import sys

# NumPy, PyTorch and scikit-image are imported in main(), after the arguments are parsed, so that --help
# works on a machine without them.
np = torch = F = None

# RGB photographs bundled with scikit-image (no download), then grayscale ones (replicated to RGB) for
# batches larger than the RGB set.
RGB_PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
              "motorcycle"]
GRAY_PHOTOS = ["camera", "coins", "moon", "grass", "gravel", "brick", "clock", "cell"]


def load_photo(name):
    from skimage import data
    if name == "motorcycle":
        img = data.stereo_motorcycle()[0]
    else:
        img = getattr(data, name)()
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return img[..., :3]


def to_square(img, size):
    """uint8 HxWx3 -> float64 3 x size x size in [0, 1]: resize the shorter side to size, centre-crop."""
    from skimage.transform import resize
    h, w = img.shape[:2]
    s = size / min(h, w)
    nh, nw = max(size, round(h * s)), max(size, round(w * s))
    im = resize(img.astype(np.float64) / 255.0, (nh, nw), order=1, anti_aliasing=True, preserve_range=True)
    top, left = (nh - size) // 2, (nw - size) // 2
    return np.ascontiguousarray(im[top:top + size, left:left + size].transpose(2, 0, 1))


def build_batch(n, size):
    names, imgs = [], []
    for name in RGB_PHOTOS + GRAY_PHOTOS:
        if len(imgs) == n:
            break
        try:
            imgs.append(to_square(load_photo(name), size))
            names.append(name)
        except Exception as e:  # an image missing from this scikit-image version: skip it
            print(f"note: skimage.data.{name} unavailable ({type(e).__name__}); skipped")
    if not imgs:
        sys.exit("real_photos.py: no photographs could be loaded from skimage.data")
    i = 0
    while len(imgs) < n:  # more images than photos: reuse them mirrored
        imgs.append(np.ascontiguousarray(imgs[i][:, :, ::-1]))
        names.append(names[i] + "(mirrored)")
        i += 1
    x = np.stack(imgs)  # (n, 3, size, size) in [0, 1]
    mean = np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
    return (x - mean) / std, names


def errors(a, b):
    """max |a-b|, max |a-b|/|b|, ||a-b||/||b|| in float64."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    d = np.abs(a - b)
    rel = d / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
    return d.max(), rel.max(), np.linalg.norm(a - b) / np.linalg.norm(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Arguments after -- go to the example binary.")
    ap.add_argument("--out", default="./real_input", help="folder for x.npy, w.npy, b.npy, y.npy (./real_input)")
    ap.add_argument("--binary", default="build/examples/01_conv_scale_min", help="the example binary")
    ap.add_argument("--n", type=int, default=8, help="batch size (8)")
    ap.add_argument("--size", type=int, default=256, help="image height and width (256)")
    ap.add_argument("--channels", type=int, default=64, choices=[3, 64],
                    help="64: fixed 1x1 stem 3->64 + ReLU (default, like the seed case); 3: conv on RGB")
    ap.add_argument("--k", type=int, default=128, help="output channels (128)")
    ap.add_argument("--scale", type=float, default=2.0, help="epilogue scale (2.0)")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the stem, W and b (0)")
    args, extra = ap.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]

    global np, torch, F
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
        import skimage  # noqa: F401  (used by load_photo / to_square)
    except ImportError as e:
        sys.exit(f"real_photos.py: needs NumPy, PyTorch and scikit-image ({e}); "
                 "e.g. pip install numpy torch scikit-image")

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu (no CUDA)'}, "
          f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
          f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}")

    # ---- inputs ----
    rgb, names = build_batch(args.n, args.size)
    print(f"photos : {', '.join(names)} -> ({args.n}, 3, {args.size}, {args.size})")
    torch.manual_seed(args.seed)
    if args.channels == 64:
        stem = torch.nn.Conv2d(3, 64, 1)  # kaiming-uniform init, fixed by the seed
        with torch.no_grad():
            x64 = F.relu(F.conv2d(torch.from_numpy(rgb), stem.weight.double(), stem.bias.double()))
        x = x64.float()
        print("x      : 1x1 stem conv 3 -> 64 + ReLU in float64, rounded to float32 once")
    else:
        x = torch.from_numpy(rgb).float()
        print("x      : the normalised RGB batch (C = 3, first-layer conv)")
    conv = torch.nn.Conv2d(x.shape[1], args.k, 3)  # W, b as torch.nn.Conv2d initialises them
    w = conv.weight.detach().float().contiguous()
    b = conv.bias.detach().float().contiguous()
    x = x.contiguous()
    print(f"shapes : x {tuple(x.shape)}, W {tuple(w.shape)}, b {tuple(b.shape)}, scale {args.scale}")

    os.makedirs(args.out, exist_ok=True)
    paths = {k: os.path.join(args.out, k + ".npy") for k in ("x", "w", "b", "y", "y_ref64", "y_torch")}
    np.save(paths["x"], x.numpy())
    np.save(paths["w"], w.numpy())
    np.save(paths["b"], b.numpy())

    # ---- PyTorch: float64 reference and default mode (fp32 tensors, TF32 conv allowed) ----
    with torch.no_grad():
        xd, wd, bd = x.to(dev), w.to(dev), b.to(dev)
        ref = torch.min(F.conv2d(xd.double(), wd.double(), bd.double()) * args.scale, dim=1, keepdim=True).values
        dflt = torch.min(F.conv2d(xd, wd, bd) * args.scale, dim=1, keepdim=True).values
    ref = ref.cpu().numpy()
    dflt = dflt.cpu().numpy()
    np.save(paths["y_ref64"], ref)
    np.save(paths["y_torch"], dflt.astype(np.float32))
    print(f"y      : {ref.shape}; saved x, w, b (float32), y_ref64, y_torch in {args.out}")
    if os.path.exists(paths["y"]):
        os.remove(paths["y"])

    # ---- the example ----
    cmd = [args.binary, "--x", paths["x"], "--weights", paths["w"], "--b", paths["b"], "--y-out", paths["y"],
           "--scale", repr(args.scale)] + extra
    print("running:", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"real_photos.py: cannot run {args.binary}: {e} (build it first, or pass --binary)")
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    verdict = lines[-1] if lines and lines[-1] in ("Passed", "Failed") else "(no Passed/Failed line)"

    if not os.path.exists(paths["y"]):
        print(f"real_photos.py: the example wrote no {paths['y']} (exit code {proc.returncode})")
        print(f"example: {verdict}")
        return proc.returncode or 1
    y = np.load(paths["y"])
    if y.shape != ref.shape:
        print(f"real_photos.py: y has shape {y.shape}, expected {ref.shape}")
        return 1

    print()
    print(f"{'comparison':38s} {'max abs':>11s} {'max rel':>11s} {'rel norm':>11s}")
    for label, a, bb in (("(a) convred vs float64", y, ref),
                         ("(b) PyTorch default vs float64", dflt, ref),
                         ("(c) convred vs PyTorch default", y, dflt)):
        mx, mr, rn = errors(a, bb)
        print(f"{label:38s} {mx:11.3e} {mr:11.3e} {rn:11.3e}")
    print(f"example: {verdict}")
    if proc.returncode != 0 or verdict != "Passed":
        return proc.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
