"""convred for PyTorch: fused conv2d -> scale -> reduction across output channels, in one CUDA kernel.

    import torch, convred
    conv = torch.nn.Conv2d(64, 128, 3).cuda()
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min")   # math: PyTorch's TF32 switch
    y = m(torch.rand(8, 64, 256, 256, device="cuda"))       # == torch.min(conv(x) * 2, 1, keepdim=True)[0]

Operators (``torch.ops.convred``): ``conv2d_reduce``, ``conv2d_reduce_packed``, ``pack_filter``,
``describe``; they have fake kernels (torch.compile) and autograd. Every CUDA call runs convred's planner
(one plan per shape, dtype, math and device, cached). See :func:`conv2d_reduce` and :class:`convred.nn.Conv2dReduce`.
"""
import torch  # noqa: F401  (loads libtorch before the extension)

from ._ops import DTYPES, MATHS, REDUCES, check_args, conv2d_reduce, default_math, kernel_name
from . import nn

__all__ = ["conv2d_reduce", "kernel_name", "default_math", "nn", "REDUCES", "MATHS", "DTYPES", "check_args"]
__version__ = "0.1.0"
