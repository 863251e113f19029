"""Float64 references and tolerances shared by the tests (imported by name: pytest puts tests/ on sys.path)."""
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

# Relative-norm bounds against float64 (README "Precision"), widened for 16-bit outputs (the result is
# rounded to the output dtype: 2^-11 for float16, 2^-8 for bfloat16).
MATH_TOL = {"ieee": 1e-5, "tf32": 1e-3, "tf32x3": 1e-5, "accurate": 1e-5, "bf16": 1e-2, "fp16": 1e-2}
DTYPE_TOL = {torch.float32: 0.0, torch.float64: 0.0, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def tol(math, dtype):
    t = max(MATH_TOL[math], DTYPE_TOL[dtype])
    if dtype in (torch.float16, torch.bfloat16) and math in ("tf32x3", "accurate"):
        t = max(t, MATH_TOL["tf32"])
    if dtype == torch.float64:
        t = 1e-12  # fp64 FMA
    return t


def conv_ref(x, w, b, stride, padding, dilation, groups, scale):
    """float64 conv2d output times scale, (N, K, P, Q), from the (already rounded) inputs."""
    out = F.conv2d(x.double().contiguous(), w.double(), None if b is None else b.double(), stride, padding,
                   dilation, groups)
    return out * scale


def reduce_ref(out, reduce):
    """PyTorch's semantics, written out: values (N,1,P,Q) float64 and indices (lowest index among ties,
    the first NaN's index when there is a NaN) or None. amin / amax are torch.amin / torch.amax themselves
    (values only; NaN propagates), so the tests of those kinds are parity tests with PyTorch."""
    if reduce == "sum":
        return out.sum(1, keepdim=True), None
    if reduce == "mean":
        return out.mean(1, keepdim=True), None
    if reduce == "amin":
        return torch.amin(out, 1, keepdim=True), None
    if reduce == "amax":
        return torch.amax(out, 1, keepdim=True), None
    want_min = reduce in ("min", "argmin")
    K = out.shape[1]
    nan = out.isnan()
    key = out.clone()
    key[nan] = 0
    ext = key.amin(1, keepdim=True) if want_min else key.amax(1, keepdim=True)
    ks = torch.arange(K, device=out.device).view(1, K, 1, 1).expand_as(out)
    big = torch.full_like(ks, K)
    first_ext = torch.where((key == ext) & ~nan, ks, big).amin(1, keepdim=True)
    first_nan = torch.where(nan, ks, big).amin(1, keepdim=True)
    any_nan = nan.any(1, keepdim=True)
    idx = torch.where(any_nan, first_nan, first_ext)
    vals = torch.where(any_nan, torch.full_like(ext, float("nan")), ext)
    return vals, idx


def rel_err(y, ref):
    """||y - ref|| / ||ref|| in float64 (NaN-free inputs)."""
    y, ref = y.double(), ref.double()
    return ((y - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def special_case(dtype, device="cuda"):
    """Depthwise 1x1 conv with weight 1 and no bias: the conv output is x exactly, channel by channel."""
    inf, nan = float("inf"), float("nan")
    cols = [
        [3.0, 1.0, 1.0, 2.0, 1.0],      # ties: lowest index (1)
        [0.0, -0.0, 0.0, 1.0, 2.0],     # +-0 compare equal: index 0
        [-0.0, 0.0, 1.0, 1.0, 2.0],     # index 0
        [2.0, nan, 1.0, nan, -1.0],     # NaN propagates, first NaN's index (1)
        [inf, inf, inf, inf, inf],      # all +inf: +inf, index 0 (the start value never leaks)
        [-inf, 1.0, -inf, 2.0, 3.0],    # -inf: index 0
        [1.0, 2.0, 3.0, 4.0, -inf],     # index 4
        [nan, nan, 1.0, 2.0, 3.0],      # index 0
    ]
    x = torch.tensor(cols, dtype=torch.float64).t().reshape(1, 5, 1, len(cols))  # (N=1, C=5, H=1, W=8)
    x = x.to(dtype).to(device)
    w = torch.ones(5, 1, 1, 1, dtype=dtype, device=device)
    return x, w


class ConvredOpLog(TorchDispatchMode):
    """Records (operator name, reduce) of every convred conv2d_reduce* call that reaches the dispatcher (also
    those made inside autograd's backward):

        with ConvredOpLog() as log:
            y = module(x)
        log.calls  # e.g. [("conv2d_reduce", "amin")]
    """

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name.startswith("convred::conv2d_reduce"):
            self.calls.append((name.split("::")[1], args[-2]))
        return func(*args, **(kwargs or {}))
