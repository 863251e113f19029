"""``convred.nn.Conv2dReduce``: a drop-in for ``reduce(nn.Conv2d(...)(x) * scale, dim=1, keepdim=True)``."""
from __future__ import annotations

import math as _pymath
import operator
from typing import Optional, Tuple, Union

import torch
from torch import nn

from ._ops import MATHS, REDUCES, _pair, default_math, kernel_name

__all__ = ["Conv2dReduce"]


def _compiling() -> bool:
    try:
        return torch.compiler.is_compiling()
    except AttributeError:  # torch < 2.3
        return torch._dynamo.is_compiling()


class Conv2dReduce(nn.Module):
    """Conv2d (zero padding) -> ``* scale`` -> reduction across the output channels, fused in one kernel.

    Parameters and ``state_dict`` keys are those of ``nn.Conv2d``: ``weight`` (K, C/groups, R, S) and
    ``bias`` (K) or none, initialised as ``nn.Conv2d`` does, so a state_dict moves between the two.

    Every CUDA forward runs convred's planner (one plan per input shape, layout, dtype, math and device,
    made once and cached). Where the plan packs the filter (the Hopper wgmma kernel), the packed filter
    (``torch.ops.convred.pack_filter``) is cached by the module; it is packed again when the weight changes
    (another tensor, e.g. after ``.to()`` or with a parametrization, or its ``_version`` counter, e.g. after
    ``optimizer.step()`` or ``load_state_dict``; not a change through ``weight.data``, which PyTorch does
    not count: set ``module._packed = None`` then), or the input's shape, layout, device or current stream,
    or the math changes. Under
    ``torch.compile`` the forward calls the unpacked operator, which packs inside the call (a few
    microseconds), so the graph holds no Python state. :meth:`kernel_for` gives the plan's description.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device, dtype:
            as ``nn.Conv2d`` (padding: int, pair, ``"valid"``, or ``"same"`` for stride 1 and odd
            dilated kernel sizes; padding_mode is always ``"zeros"``).
        scale: multiplies the conv output before the reduction.
        reduce: ``min``, ``max``, ``amin``, ``amax``, ``sum``, ``mean``, ``argmin``, ``argmax`` (see
            ``convred.conv2d_reduce``).
        math: None (default: PyTorch's own switch, read at each forward in eager mode, once when the graph
            is traced under torch.compile: ``tf32`` when
            ``torch.backends.cudnn.allow_tf32`` is True, as PyTorch's default conv math, ``accurate`` when
            it is False; ``ieee`` for float64), or ``ieee`` (exact fp32 FMA), ``tf32``, ``tf32x3``, ``bf16``,
            ``fp16``, ``accurate`` (error vs float64 <= 1e-6); see ``convred.conv2d_reduce``.
        return_indices: for min/max, return ``(values, indices)`` instead of values. Without it, min/max
            call the operator with ``amin``/``amax`` (values only: a faster kernel that writes no indices;
            the backward then recomputes the selected channels with one more fused forward pass);
            ``self.reduce`` stays ``min``/``max``.

    Shapes: x (N, C, H, W) contiguous or channels_last (float32, float16, bfloat16; float64 with ieee) ->
    (N, 1, P, Q) values, or int64 indices for argmin/argmax.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, scale: float = 1.0, reduce: str = "min",
                 math: Optional[str] = None,
                 return_indices: bool = False, device=None, dtype=None):
        super().__init__()
        if reduce not in REDUCES:
            raise ValueError(f"Conv2dReduce: argument 'reduce' must be one of {', '.join(REDUCES)}, got '{reduce}'")
        if math is not None and math not in MATHS:
            raise ValueError(f"Conv2dReduce: argument 'math' must be None or one of {', '.join(MATHS)}, got '{math}'")
        try:
            g = operator.index(groups)  # (ints and integer-likes such as numpy's, as nn.Conv2d takes)
        except TypeError:
            g = 0
        if g < 1:
            raise ValueError(f"Conv2dReduce: argument 'groups' must be an integer >= 1, got {groups!r}")
        groups = g
        if in_channels % groups or out_channels % groups:
            raise ValueError("Conv2dReduce: argument 'groups' must divide in_channels and out_channels")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = tuple(_pair(kernel_size, "kernel_size"))
        self.stride = tuple(_pair(stride, "stride"))
        self.dilation = tuple(_pair(dilation, "dilation"))
        self.padding = self._resolve_padding(padding, self.kernel_size, self.stride, self.dilation)
        self.scale, self.reduce, self.math, self.return_indices = float(scale), reduce, math, return_indices
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty((out_channels, in_channels // groups) + self.kernel_size, **kw))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        self._packed = None  # (key, uint8 tensor): not a buffer, so the state_dict keys stay nn.Conv2d's
        self.pack_count = 0  # how many times the filter was packed (for tests and curiosity)

    @staticmethod
    def _resolve_padding(padding, kernel_size, stride, dilation) -> Tuple[int, int]:
        if padding == "valid":
            return (0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError("Conv2dReduce: padding='same' needs stride 1")
            tot = [d * (k - 1) for d, k in zip(dilation, kernel_size)]
            if any(t % 2 for t in tot):
                raise ValueError("Conv2dReduce: padding='same' with an even dilated kernel size is asymmetric "
                                 "(not supported: convred pads both sides equally)")
            return (tot[0] // 2, tot[1] // 2)
        return tuple(_pair(padding, "padding"))

    def reset_parameters(self) -> None:
        """nn.Conv2d's initialisation (Kaiming-uniform weight with a = sqrt(5), uniform bias)."""
        nn.init.kaiming_uniform_(self.weight, a=_pymath.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * self.weight.shape[2] * self.weight.shape[3]
            if fan_in:
                bound = 1 / _pymath.sqrt(fan_in)
                nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, scale: float = 1.0, reduce: str = "min", math: Optional[str] = None,
                  return_indices: bool = False) -> "Conv2dReduce":
        """A Conv2dReduce sharing ``conv``'s weight and bias Parameters (no copy: training either trains
        both). ``conv.padding_mode`` must be ``"zeros"``. Raises ValueError otherwise."""
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"Conv2dReduce.from_conv: argument 'conv' must be an nn.Conv2d, got {type(conv)}")
        if conv.padding_mode != "zeros":
            raise ValueError(f"Conv2dReduce.from_conv: argument 'conv' has padding_mode '{conv.padding_mode}'; "
                             "only 'zeros' is supported")
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        m.in_channels, m.out_channels, m.groups = conv.in_channels, conv.out_channels, conv.groups
        m.kernel_size, m.stride, m.dilation = tuple(conv.kernel_size), tuple(conv.stride), tuple(conv.dilation)
        m.padding = cls._resolve_padding(conv.padding, m.kernel_size, m.stride, m.dilation)
        if reduce not in REDUCES:
            raise ValueError(f"Conv2dReduce: argument 'reduce' must be one of {', '.join(REDUCES)}, got '{reduce}'")
        if math is not None and math not in MATHS:
            raise ValueError(f"Conv2dReduce: argument 'math' must be None or one of {', '.join(MATHS)}, got '{math}'")
        m.scale, m.reduce, m.math, m.return_indices = float(scale), reduce, math, return_indices
        m.weight = conv.weight
        if conv.bias is not None:
            m.bias = conv.bias
        else:
            m.register_parameter("bias", None)
        m._packed = None
        m.pack_count = 0
        return m

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={self.bias is not None}, scale={self.scale}, reduce='{self.reduce}', math={self.math!r}")

    def _math(self, x: torch.Tensor) -> str:
        """The math of this forward: self.math, or when None PyTorch's switch (convred.default_math)."""
        return self.math if self.math is not None else default_math(x.dtype)

    def _weight(self) -> torch.Tensor:
        # a model moved to channels_last has channels_last 4-D parameters: the kernels read KCRS
        w = self.weight
        return w if w.is_contiguous() else w.contiguous()

    def _packed_for(self, x: torch.Tensor, w: torch.Tensor, math: str) -> Optional[torch.Tensor]:
        """The cached prepared bytes of the plan for x (packed again if the key changed): the packed filter
        where the plan packs one, else an empty tensor; None on the CPU."""
        if not x.is_cuda:
            return None
        channels_last = not x.is_contiguous()
        # The weight by identity and version (a parametrized weight is a new tensor each forward: packed
        # again), the current stream (the packed bytes are made and read on it), and every plan input.
        weight = self.weight
        key = (weight._version, torch.cuda.current_stream(x.device).cuda_stream, x.device, tuple(x.shape),
               channels_last, x.dtype, math, self.stride, self.padding, self.dilation, self.groups)
        if self._packed is None or self._packed[0] is not weight or self._packed[1] != key:
            with torch.no_grad():
                packed = torch.ops.convred.pack_filter(w.detach(), list(x.shape), list(self.stride),
                                                       list(self.padding), list(self.dilation), self.groups, math,
                                                       channels_last)
            self._packed = (weight, key, packed)
            if packed.numel() > 0:
                self.pack_count += 1
        return self._packed[2]

    def forward(self, x: torch.Tensor):
        """x (N, C, H, W), contiguous or channels_last, the module's dtype and device -> (N, 1, P, Q): values
        in x's dtype (min, max, amin, amax, sum, mean), int64 indices (argmin, argmax), or (values, indices)
        for min/max with return_indices. Raises ValueError / TypeError naming the bad argument (see
        convred.conv2d_reduce)."""
        w = self._weight()
        math = self._math(x)
        args = (list(self.stride), list(self.padding), list(self.dilation), self.groups, self.scale,
                self._op_reduce(), math)
        packed = None if _compiling() else self._packed_for(x, w, math)
        if packed is not None:
            values, indices = torch.ops.convred.conv2d_reduce_packed(x, w, packed, self.bias, *args)
        else:
            values, indices = torch.ops.convred.conv2d_reduce(x, w, self.bias, *args)
        if self.reduce in ("argmin", "argmax"):
            return indices
        if self.reduce in ("min", "max") and self.return_indices:
            return values, indices
        return values

    def _op_reduce(self) -> str:
        """The operator's ``reduce`` for this module: ``amin``/``amax`` for min/max without return_indices
        (the indices would be thrown away; the values-only kernel skips them), else ``self.reduce``."""
        if self.reduce in ("min", "max") and not self.return_indices:
            return "a" + self.reduce
        return self.reduce

    def kernel_for(self, x: torch.Tensor) -> str:
        """The description of the plan ``self(x)`` runs (e.g. ``"wgmma tf32 (sm_90a, packed filter ...)"``,
        ``"mma.sync bf16 ..."``, ``"simt ieee ..."``, ``"cpu-reference ..."``); see convred.kernel_name."""
        return kernel_name(x, self._weight(), self.stride, self.padding, self.dilation, self.groups, self._math(x))

    describe = kernel_for
