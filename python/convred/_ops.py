"""Fake (meta) kernels, autograd and the functional API of the convred operators.

The operators themselves (schemas, CUDA and CPU kernels) are defined in C++ (csrc/binding.cpp) with
TORCH_LIBRARY; loading the shared library ``convred/_C*.so`` (torch.ops.load_library, below) registers
them as ``torch.ops.convred.*``.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import importlib.util

import torch


def _load_library():
    spec = importlib.util.find_spec("convred._C")
    if spec is None or spec.origin is None:
        raise ImportError("convred: the compiled extension convred/_C*.so is missing: build it with "
                          "`pip install --no-build-isolation ./python` (README, section Python)")
    torch.ops.load_library(spec.origin)


_load_library()

REDUCES = ("min", "max", "amin", "amax", "sum", "mean", "argmin", "argmax")
# the reduce kinds whose indices output is (N, 1, P, Q) int64; the others return an empty int64 tensor there
INDEX_REDUCES = ("min", "max", "argmin", "argmax")
# values-only kinds that select a channel (their gradient needs the index: recomputed in backward)
_VALUE_SELECT = {"amin": "argmin", "amax": "argmax"}
MATHS = ("ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_OP = "convred.conv2d_reduce"

IntPair = Union[int, Sequence[int]]


def _tf32_allowed() -> bool:
    """PyTorch's switch for TF32 in cuDNN convolutions (``torch.backends.cudnn.allow_tf32``, or on PyTorch
    builds where the legacy flag refuses to answer, ``torch.backends.cudnn.conv.fp32_precision == "tf32"``)."""
    try:
        return bool(torch.backends.cudnn.allow_tf32)
    except RuntimeError:  # the legacy and the new TF32 APIs were mixed: ask the new one
        return torch.backends.cudnn.conv.fp32_precision == "tf32"


@torch.compiler.assume_constant_result
def _default_math_f32() -> str:
    return "tf32" if _tf32_allowed() else "accurate"


def default_math(dtype: torch.dtype = torch.float32) -> str:
    """The math used when ``math`` is None: PyTorch's own choice for convolutions. ``"tf32"`` when
    ``torch.backends.cudnn.allow_tf32`` is True (PyTorch's default: cuDNN runs fp32 convolutions in TF32),
    ``"accurate"`` (error vs float64 <= 1e-6) when it is False; ``"ieee"`` for float64. Read at each call
    (under torch.compile: when the graph is traced)."""
    if dtype == torch.float64:
        return "ieee"
    return _default_math_f32()


def _pair(v: IntPair, name: str) -> list:
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"{_OP}: argument '{name}' must have 2 elements, got {len(v)}")
    return v


def _out_size(size, pad, dil, k, stride):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


_MAX_EXTENT = 1 << 40  # convred::detail::max_extent
_COORD_LIMIT = 1 << 30  # input coordinates are 32-bit in the kernels
_INDEX_LIMIT = (2**31 - 1) // 2  # channel and GEMM_K indices likewise
# convred::to_string of the two statuses (include/convred/status.cuh)
_INVALID_SHAPE = "invalid_shape: N must be >= 0 and C, H, W, K, R, S >= 1 (each at most 2^40)"
_SIZE_OVERFLOW = ("size_overflow: a size past the kernels' limits (a tensor's bytes past int64, a channel, GEMM_K or "
                  "coordinate index at 2^30 or more, a workspace or launch grid too large)")


def check_args(x, weight, bias, stride, padding, dilation, groups, reduce, math):
    """The operator's argument checks (the same rules, messages and exception types as the C++ kernels'
    ``check_args``), used by the fake kernels. Returns the output spatial size (P, Q)."""
    if reduce not in REDUCES:
        raise ValueError(f"{_OP}: argument 'reduce' must be one of {', '.join(REDUCES)}, got '{reduce}'")
    if math not in MATHS:
        raise ValueError(f"{_OP}: argument 'math' must be one of {', '.join(MATHS)}, got '{math}'")
    if x.dtype not in DTYPES:
        raise TypeError(f"{_OP}: argument 'x' must be float32, float16, bfloat16 or float64, got {x.dtype}")
    if x.dim() != 4:
        raise ValueError(f"{_OP}: argument 'x' must be 4-D (N, C, H, W), got {x.dim()}-D")
    if not (x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last)):
        raise ValueError(f"{_OP}: argument 'x' must be contiguous (NCHW) or channels_last contiguous (NHWC)")
    if weight.dtype != x.dtype:
        raise TypeError(f"{_OP}: argument 'weight' must have x's dtype {x.dtype}, got {weight.dtype}")
    if weight.device != x.device:
        raise ValueError(f"{_OP}: argument 'weight' must be on x's device {x.device}, got {weight.device}")
    if weight.dim() != 4:
        raise ValueError(f"{_OP}: argument 'weight' must be 4-D (K, C/groups, R, S), got {weight.dim()}-D")
    if not weight.is_contiguous():
        raise ValueError(f"{_OP}: argument 'weight' must be contiguous (K, C/groups, R, S)")
    if groups < 1:
        raise ValueError(f"{_OP}: argument 'groups' must be >= 1, got {groups}")
    for name, v, lo in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        if len(v) != 2:
            raise ValueError(f"{_OP}: argument '{name}' must have 2 elements, got {len(v)}")
        if v[0] < lo or v[1] < lo:
            raise ValueError(f"{_OP}: argument '{name}' must be >= {lo}, got {list(v)}")
    N, C, H, W = x.shape
    K, Cg, R, S = weight.shape
    if C < 1 or H < 1 or W < 1:
        raise ValueError(f"{_OP}: argument 'x' must have C, H, W >= 1, got {list(x.shape)}")
    if K < 1 or R < 1 or S < 1:
        raise ValueError(f"{_OP}: argument 'weight' must have K, R, S >= 1, got {list(weight.shape)}")
    if C % groups != 0 or K % groups != 0:
        raise ValueError(f"{_OP}: argument 'groups' ({groups}) must divide x's channels ({C}) and weight's "
                         f"output channels ({K})")
    if Cg * groups != C:
        raise ValueError(f"{_OP}: argument 'weight' must have C/groups = {C // groups} input channels, got {Cg}")
    if bias is not None:
        if bias.dtype != x.dtype:
            raise TypeError(f"{_OP}: argument 'bias' must have x's dtype {x.dtype}, got {bias.dtype}")
        if bias.device != x.device:
            raise ValueError(f"{_OP}: argument 'bias' must be on x's device {x.device}, got {bias.device}")
        if bias.dim() != 1 or bias.shape[0] != K:
            raise ValueError(f"{_OP}: argument 'bias' must have shape ({K}), got {list(bias.shape)}")
        if not bias.is_contiguous():
            raise ValueError(f"{_OP}: argument 'bias' must be contiguous")
    if x.dtype == torch.float64 and math not in ("ieee", "accurate"):
        raise ValueError(f"{_OP}: argument 'math' must be 'ieee' or 'accurate' for float64 x (tensor cores take "
                         f"32- and 16-bit inputs), got '{math}'")
    # convred::validate's limits, in its order (the C++ check_args reports its status the same way), where
    # the sizes are plain ints: a symbolic size under torch.compile (a data-dependent batch among them) is
    # left to the real op, so that these checks add no guards
    concrete = all(type(v) is int for v in (N, C, H, W, K, Cg, R, S, *stride, *padding, *dilation))

    def refuse(status):
        raise ValueError(f"{_OP}: arguments 'x', 'weight', 'stride', 'padding', 'dilation' (sizes {list(x.shape)}, "
                         f"{list(weight.shape)}, stride {list(stride)}, padding {list(padding)}, dilation "
                         f"{list(dilation)}): {status}")
    if concrete and any(v > _MAX_EXTENT for v in (N, C, H, W, K, R, S)):
        refuse(_INVALID_SHAPE)
    if concrete and (any(v > _COORD_LIMIT for v in (R, S, *padding, *stride, *dilation))
                     or H + 2 * padding[0] + dilation[0] * (R - 1) + stride[0] > _COORD_LIMIT
                     or W + 2 * padding[1] + dilation[1] * (S - 1) + stride[1] > _COORD_LIMIT):
        refuse(_SIZE_OVERFLOW)
    P = _out_size(H, padding[0], dilation[0], R, stride[0])
    Q = _out_size(W, padding[1], dilation[1], S, stride[1])
    if P < 1 or Q < 1:
        raise ValueError(f"{_OP}: arguments 'weight', 'padding', 'dilation': the dilated kernel is larger than "
                         f"the padded input (output size {P} x {Q})")
    if concrete:
        n1, e = max(N, 1), x.element_size()
        if max(n1 * C * H * W * e, K * Cg * R * S * e, n1 * K * P * Q * e, n1 * P * Q * 8) >= 1 << 63:
            refuse(_SIZE_OVERFLOW)
        if max(C, K, Cg * R * S) > _INDEX_LIMIT:
            refuse(_SIZE_OVERFLOW)
    return N, P, Q


def _fake_outputs(x, reduce, N, P, Q):
    y = x.new_empty((N, 1, P, Q))
    if reduce not in INDEX_REDUCES:  # amin, amax, sum, mean: an empty int64 tensor (binding.cpp, empty_outputs)
        return y, x.new_empty((0,), dtype=torch.int64)
    return y, x.new_empty((N, 1, P, Q), dtype=torch.int64)


@torch.library.register_fake("convred::conv2d_reduce")
def _conv2d_reduce_fake(x, weight, bias, stride, padding, dilation, groups, scale, reduce, math):
    N, P, Q = check_args(x, weight, bias, stride, padding, dilation, groups, reduce, math)
    return _fake_outputs(x, reduce, N, P, Q)


@torch.library.register_fake("convred::conv2d_reduce_packed")
def _conv2d_reduce_packed_fake(x, weight, packed, bias, stride, padding, dilation, groups, scale, reduce, math):
    N, P, Q = check_args(x, weight, bias, stride, padding, dilation, groups, reduce, math)
    if packed.dtype != torch.uint8:
        raise TypeError(f"{_OP}: argument 'packed' must be uint8, got {packed.dtype}")
    if packed.dim() != 1:
        raise ValueError(f"{_OP}: argument 'packed' must be a contiguous 1-D uint8 tensor (pack_filter's output)")
    return _fake_outputs(x, reduce, N, P, Q)


@torch.library.register_fake("convred::pack_filter")
def _pack_filter_fake(weight, x_shape, stride, padding, dilation, groups, math, channels_last=False):
    # the size depends on the device's plan (0 where it packs nothing): data-dependent
    ctx = torch.library.get_ctx()
    n = ctx.new_dynamic_size()
    return weight.new_empty((n,), dtype=torch.uint8)


# ------------------------------------------------------------------------------------------ autograd
def _setup_context(ctx, inputs, output):
    x, weight, bias = inputs[0], inputs[1], inputs[-8]
    stride, padding, dilation, groups, scale, reduce, math = inputs[-7:]
    _, indices = output
    if reduce in _VALUE_SELECT:
        # amin / amax wrote no indices: backward recomputes them, and needs bias (and the packed filter of
        # conv2d_reduce_packed, inputs[2]) for that
        packed = inputs[2] if len(inputs) == 11 else None
        ctx.save_for_backward(x, weight, None, bias, packed)
    else:
        ctx.save_for_backward(x, weight, indices if reduce in INDEX_REDUCES else None, None, None)
    ctx.conf = (list(stride), list(padding), list(dilation), groups, scale, reduce, bias is not None, math)


def _grad_conv_out(ctx, grad_values, x, weight, indices):
    """dL/d(conv output), (N, K, P, Q): the epilogue's scale times the reduction's gradient."""
    scale, reduce = ctx.conf[4], ctx.conf[5]
    K = weight.shape[0]
    g = grad_values * scale  # (N, 1, P, Q)
    shape = (g.shape[0], K, g.shape[2], g.shape[3])
    if reduce in ("sum", "mean"):
        if reduce == "mean":
            g = g / K
        return g.expand(shape).contiguous()
    # min / max / argmin / argmax / amin / amax: all of it to the selected channel (as torch.min(x, dim)'s
    # backward; for amin / amax this differs from torch.amin, which splits it evenly among tied channels)
    return torch.zeros(shape, dtype=g.dtype, device=g.device).scatter_(1, indices, g)


def _selected_indices(ctx, x, weight, bias, packed):
    """amin / amax: the index of the selected channel, which the forward did not write. Recomputed by calling
    the operator again with argmin / argmax (the same arguments and math, so the same channel as the forward's
    value): one more fused forward pass (conv and reduction) in the backward, the price of the faster
    values-only forward."""
    stride, padding, dilation, groups, scale, reduce, _, math = ctx.conf
    with torch.no_grad():
        if packed is not None:
            _, indices = torch.ops.convred.conv2d_reduce_packed(x, weight, packed, bias, stride, padding, dilation,
                                                                groups, scale, _VALUE_SELECT[reduce], math)
        else:
            _, indices = torch.ops.convred.conv2d_reduce(x, weight, bias, stride, padding, dilation, groups, scale,
                                                         _VALUE_SELECT[reduce], math)
    return indices


def _backward(ctx, grad_values, grad_indices):
    x, weight, indices, bias, packed = ctx.saved_tensors
    stride, padding, dilation, groups, scale, reduce, has_bias, _ = ctx.conf
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    need_b = has_bias and ctx.needs_input_grad[-8]
    gx = gw = gb = None
    if grad_values is not None and (need_x or need_w or need_b):
        if reduce in _VALUE_SELECT:
            indices = _selected_indices(ctx, x, weight, bias, packed)
        g = _grad_conv_out(ctx, grad_values, x, weight, indices)
        if need_x:
            gx = torch.nn.grad.conv2d_input(x.shape, weight, g, stride, padding, dilation, groups)
        if need_w:
            gw = torch.nn.grad.conv2d_weight(x, weight.shape, g, stride, padding, dilation, groups)
        if need_b:
            gb = g.sum(dim=(0, 2, 3))
    return gx, gw, gb


def _backward_plain(ctx, grad_values, grad_indices):
    gx, gw, gb = _backward(ctx, grad_values, grad_indices)
    return gx, gw, gb, None, None, None, None, None, None, None


def _backward_packed(ctx, grad_values, grad_indices):
    gx, gw, gb = _backward(ctx, grad_values, grad_indices)
    return gx, gw, None, gb, None, None, None, None, None, None, None


torch.library.register_autograd("convred::conv2d_reduce", _backward_plain, setup_context=_setup_context)
torch.library.register_autograd("convred::conv2d_reduce_packed", _backward_packed, setup_context=_setup_context)


# ------------------------------------------------------------------------------------------ functional
def conv2d_reduce(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    scale: float = 1.0,
    reduce: str = "min",
    math: Optional[str] = None,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Fused ``reduce(conv2d(x, weight, bias, stride, padding, dilation, groups) * scale, dim=1, keepdim=True)``.

    One kernel on CUDA tensors (the (N, K, P, Q) conv output never reaches memory), launched on the
    current stream of x's device; on CPU tensors a reference built from ATen ops (exact; ``math`` is
    checked and ignored). Differentiable in x, weight and bias (``reduce`` other than argmin/argmax
    indices; see below). Works under ``torch.compile(fullgraph=True)``.

    Args:
        x: (N, C, H, W), contiguous NCHW or ``torch.channels_last``; float32, float16, bfloat16 or
            float64 (float64 needs ``math="ieee"``).
        weight: (K, C/groups, R, S), contiguous, x's dtype and device (``nn.Conv2d.weight``).
        bias: (K,) in x's dtype and device, or None.
        stride, padding, dilation: int or pair (as ``torch.nn.functional.conv2d``; padding >= 0, zero padding).
        groups: divides C and K.
        scale: multiplies the conv output (with its bias) before the reduction (fp32; fp64 for float64).
        reduce: ``"min"``/``"max"`` -> ``(values, indices)`` as ``torch.min(t, dim=1, keepdim=True)``
            (NaN propagates; lowest index among ties; ``-0.0 == +0.0``); ``"amin"``/``"amax"`` -> values
            only, as ``torch.amin(t, dim=1, keepdim=True)`` (the same values as min/max, from a faster
            kernel that tracks no index; its gradient goes to the channel min/max would select, all of it
            to the lowest index among ties, and costs one more fused forward pass in the backward, which
            recomputes that index); ``"argmin"``/``"argmax"`` -> indices (int64); ``"sum"``/``"mean"`` ->
            values (accumulated in fp32, fp64 for float64).
        math: None (default) follows PyTorch's own switch for convolutions (:func:`default_math`):
            ``"tf32"`` when ``torch.backends.cudnn.allow_tf32`` is True (PyTorch's default), ``"accurate"``
            when it is False (``"ieee"`` for float64). Or one of ``"ieee"`` (exact fp32 FMA; fp64 for
            float64), ``"tf32"``, ``"tf32x3"`` (3xTF32: fp32-level accuracy on tensor cores), ``"bf16"``,
            ``"fp16"`` (operands rounded on chip, fp32 accumulation), ``"accurate"`` (error vs float64 <=
            1e-6: the planner picks the fastest kernel that holds it). For float16 / bfloat16 x, tf32,
            tf32x3 and accurate run the x-dtype's own tensor-core kernel: its operands are exact in TF32 and
            in their own type alike, so the products are the same. The kernel is chosen by convred's
            planner, once per (shape, dtype, math, device), and cached; :func:`kernel_name` gives its
            description.

    Returns:
        values (N, 1, P, Q) in x's dtype, contiguous (min/max: with the indices; amin/amax/sum/mean: alone);
        indices (N, 1, P, Q) int64 (min/max/argmin/argmax).

    Raises:
        ValueError / TypeError naming the bad argument (device, dtype, rank, shape, layout, groups,
        stride/padding/dilation, reduce, math); nothing is launched or written then.
    """
    if reduce not in REDUCES:
        raise ValueError(f"{_OP}: argument 'reduce' must be one of {', '.join(REDUCES)}, got '{reduce}'")
    if math is None:
        math = default_math(x.dtype)
    values, indices = torch.ops.convred.conv2d_reduce(
        x, weight, bias, _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation"),
        groups, float(scale), reduce, math)
    if reduce in ("min", "max"):
        return values, indices
    if reduce in ("argmin", "argmax"):
        return indices
    return values


def kernel_name(x: torch.Tensor, weight: torch.Tensor, stride: IntPair = 1, padding: IntPair = 0,
                dilation: IntPair = 1, groups: int = 1, math: Optional[str] = None) -> str:
    """What :func:`conv2d_reduce` runs for these arguments: on a CUDA x, the description of convred's plan
    for them on x's device (kernel, tiles, mode, workspace and why, e.g. ``"wgmma tf32 (sm_90a, ...)"``,
    ``"mma.sync bf16 ..."``, ``"simt ieee ..."``, ``"direct (exact fp32 FMA, ...)"``); on a CPU x,
    ``"cpu-reference ..."``. The same checks as :func:`conv2d_reduce` (raises ValueError / TypeError naming a
    bad argument); math None resolves as there."""
    if math is None:
        math = default_math(x.dtype)
    return torch.ops.convred.describe(x, weight, _pair(stride, "stride"), _pair(padding, "padding"),
                                      _pair(dilation, "dilation"), groups, math)
