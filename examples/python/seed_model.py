"""The seed problem as KernelBench-style models.

Model:    the reference, conv2d -> * scale -> torch.min over channels (PyTorch eager: cuDNN conv + two kernels).
ModelNew: the same computation as one fused convred kernel (convred.nn.Conv2dReduce), sharing Model's
          Parameters when built with ModelNew.from_model (so both compute from identical weights). The
          module returns values only, so it runs the values-only kernel (reduce "amin"), not argmin.

Shapes (get_inputs): x (64, 64, 256, 256) float32 NCHW -> y (64, 1, 254, 254).
"""
import torch
from torch import nn

import convred

batch_size = 64
in_channels = 64
out_channels = 128
height = width = 256
kernel_size = 3
scale_factor = 2.0


class Model(nn.Module):
    """y = torch.min(conv(x) * scale_factor, dim=1, keepdim=True)[0]."""

    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.conv(x)
        x = x * self.scale_factor
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x


class ModelNew(nn.Module):
    """Model with conv, scale and min fused by convred. Same constructor and state_dict keys as Model
    (``conv.weight``, ``conv.bias``), plus ``math`` (convred precision: ieee, tf32, tf32x3, bf16, fp16)."""

    def __init__(self, in_channels, out_channels, kernel_size, scale_factor, math="tf32"):
        super().__init__()
        self.conv = convred.nn.Conv2dReduce(in_channels, out_channels, kernel_size, scale=scale_factor,
                                            reduce="min", math=math)

    @classmethod
    def from_model(cls, model: Model, math="tf32"):
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        m.conv = convred.nn.Conv2dReduce.from_conv(model.conv, scale=model.scale_factor, reduce="min", math=math)
        return m

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
