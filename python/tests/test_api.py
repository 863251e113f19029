"""Device-independent tests: argument errors (C++ kernels and fake kernels), the CPU reference kernel,
opcheck, gradcheck, torch.compile and the module, on CPU (and on CUDA too where one is present)."""
import re

import pytest
import torch
import torch.nn.functional as F

import convred
from reference import ConvredOpLog, conv_ref, reduce_ref, special_case

OP = torch.ops.convred.conv2d_reduce


def args_of(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, scale=1.0, reduce="min",
            math="ieee"):
    return (x, w, b, list(stride), list(padding), list(dilation), groups, scale, reduce, math)


def good(device="cpu", dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 7, 8, generator=g, dtype=dtype).to(device)
    w = torch.randn(6, 4, 3, 3, generator=g, dtype=dtype).to(device)
    b = torch.randn(6, generator=g, dtype=dtype).to(device)
    return x, w, b


# (id, argument named in the message, exception type, function of (x, w, b) -> op args)
BAD = [
    ("x-dtype", "x", TypeError, lambda x, w, b: args_of(x.int(), w.int(), None)),
    ("x-rank", "x", ValueError, lambda x, w, b: args_of(x[0], w, b)),
    ("x-noncontig", "x", ValueError, lambda x, w, b: args_of(x.transpose(2, 3), w, b)),
    ("x-empty-channels", "x", ValueError, lambda x, w, b: args_of(x[:, :0], w[:, :0], b)),
    ("w-dtype", "weight", TypeError, lambda x, w, b: args_of(x, w.double(), b)),
    ("w-rank", "weight", ValueError, lambda x, w, b: args_of(x, w[0], b)),
    ("w-noncontig", "weight", ValueError, lambda x, w, b: args_of(x, w.transpose(2, 3), b)),
    ("w-channels", "weight", ValueError, lambda x, w, b: args_of(x, w[:, :3].contiguous(), b)),
    ("w-too-big", "weight", ValueError, lambda x, w, b: args_of(x[:, :, :2, :2].contiguous(), w, b)),
    ("b-shape", "bias", ValueError, lambda x, w, b: args_of(x, w, b[:5])),
    ("b-dtype", "bias", TypeError, lambda x, w, b: args_of(x, w, b.double())),
    ("b-noncontig", "bias", ValueError, lambda x, w, b: args_of(x, w, torch.cat([b, b])[::2])),
    ("stride-0", "stride", ValueError, lambda x, w, b: args_of(x, w, b, stride=(0, 1))),
    ("stride-len", "stride", ValueError, lambda x, w, b: args_of(x, w, b, stride=(1, 1, 1))),
    ("padding-neg", "padding", ValueError, lambda x, w, b: args_of(x, w, b, padding=(-1, 0))),
    ("dilation-0", "dilation", ValueError, lambda x, w, b: args_of(x, w, b, dilation=(1, 0))),
    ("groups-0", "groups", ValueError, lambda x, w, b: args_of(x, w, b, groups=0)),
    ("padding-huge", "padding", ValueError, lambda x, w, b: args_of(x, w, b, padding=(2**62, 0))),
    ("dilation-huge", "dilation", ValueError, lambda x, w, b: args_of(x, w, b, dilation=(2**62, 1))),
    ("groups-divide", "groups", ValueError, lambda x, w, b: args_of(x, w, b, groups=3)),
    ("reduce", "reduce", ValueError, lambda x, w, b: args_of(x, w, b, reduce="median")),
    ("reduce-case", "reduce", ValueError, lambda x, w, b: args_of(x, w, b, reduce="AMIN")),
    ("math", "math", ValueError, lambda x, w, b: args_of(x, w, b, math="fp8")),
    ("f64-math", "math", ValueError, lambda x, w, b: args_of(x.double(), w.double(), b.double(), math="tf32")),
]


def devices():
    return ["cpu", pytest.param("cuda", marks=pytest.mark.gpu), "meta"]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_argument_names_it(device, case):
    _, name, exc, make = case
    x, w, b = good(device)
    with pytest.raises(exc, match=f"'{name}'"):
        OP(*make(x, w, b))


@pytest.mark.gpu
def test_bad_device_names_it():
    x, w, b = good("cuda")
    with pytest.raises(ValueError, match="'weight'"):
        OP(*args_of(x, w.cpu(), b))
    with pytest.raises(ValueError, match="'bias'"):
        OP(*args_of(x, w, b.cpu()))
    torch.cuda.synchronize()  # nothing pending


def test_bad_reduce_message():
    """A bad reduce names the argument and lists every kind (amin and amax too), with the same message from
    the C++ kernel, the fake kernel, the functional API and the module."""
    kinds = "min, max, amin, amax, sum, mean, argmin, argmax"
    msgs = []
    for device in ("cpu", "meta"):
        x, w, b = good(device)
        with pytest.raises(ValueError, match=f"argument 'reduce' must be one of {kinds}, got 'median'") as e:
            OP(*args_of(x, w, b, reduce="median"))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    x, w, b = good("cpu")
    with pytest.raises(ValueError, match=f"argument 'reduce' must be one of {kinds}, got 'median'"):
        convred.conv2d_reduce(x, w, b, reduce="median")
    with pytest.raises(ValueError, match="argument 'reduce'"):
        convred.nn.Conv2dReduce(4, 6, 3, reduce="median")
    with pytest.raises(ValueError, match="argument 'reduce'"):
        convred.nn.Conv2dReduce.from_conv(torch.nn.Conv2d(4, 6, 3), reduce="median")


def test_meta_and_cpu_errors_agree():
    """The fake kernel (Python) and the C++ checks raise the same type with the same message."""
    for _, _, _, make in BAD:
        msgs = []
        for device in ("cpu", "meta"):
            x, w, b = good(device)
            try:
                OP(*make(x, w, b))
                msgs.append(None)
            except (ValueError, TypeError) as e:
                msgs.append((type(e), re.search(r"arguments? '[^']+'(, '[^']+')*", str(e)).group(0)))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize("reduce", convred.REDUCES)
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_cpu_reference_matches_float64(reduce, layout):
    x, w, b = good("cpu")
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    vals, idx = OP(*args_of(x, w, b, stride=(1, 2), padding=(1, 0), scale=-1.5, reduce=reduce))
    rv, ri = reduce_ref(conv_ref(x, w, b, (1, 2), (1, 0), (1, 1), 1, -1.5), reduce)
    assert vals.shape == rv.shape and vals.dtype == x.dtype and vals.is_contiguous()
    torch.testing.assert_close(vals.double(), rv, rtol=1e-5, atol=1e-5)
    if ri is None:
        assert idx.numel() == 0
    else:
        assert torch.equal(idx, ri)


def test_empty_batch():
    x, w, b = good("cpu")
    vals, idx = OP(*args_of(x[:0], w, b))
    assert vals.shape == (0, 1, 5, 6) and idx.shape == (0, 1, 5, 6)


def test_functional_returns():
    x, w, b = good("cpu")
    v, i = convred.conv2d_reduce(x, w, b, scale=2.0, reduce="min")
    ref = torch.min(F.conv2d(x, w, b) * 2.0, dim=1, keepdim=True)
    torch.testing.assert_close(v, ref.values)
    assert torch.equal(i, ref.indices)
    assert torch.equal(convred.conv2d_reduce(x, w, b, scale=2.0, reduce="argmin"), ref.indices)
    s = convred.conv2d_reduce(x, w, b, reduce="sum", padding=1)
    assert s.shape == (2, 1, 7, 8)
    with pytest.raises(ValueError, match="'stride'"):
        convred.conv2d_reduce(x, w, b, stride=(1, 1, 1))


OPCHECK_REDUCES = ["min", "max", "amin", "amax", "sum", "mean", "argmax"]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("reduce", OPCHECK_REDUCES)
def test_opcheck(device, reduce):
    dtype = torch.float32
    x, w, b = good(device, dtype)
    x.requires_grad_(reduce != "argmax")
    w.requires_grad_(reduce != "argmax")
    torch.library.opcheck(OP, args_of(x, w, b, padding=(1, 1), scale=2.0, reduce=reduce))
    xc = x.detach().contiguous(memory_format=torch.channels_last)
    torch.library.opcheck(OP, args_of(xc, w.detach(), None, stride=(2, 1), reduce=reduce))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("reduce", ["min", "amin", "amax"])
def test_opcheck_packed(device, reduce):
    x, w, b = good(device)
    packed = torch.ops.convred.pack_filter(w, list(x.shape), [1, 1], [0, 0], [1, 1], 1, "tf32")
    torch.library.opcheck(torch.ops.convred.conv2d_reduce_packed,
                          (x, w, packed, b, [1, 1], [0, 0], [1, 1], 1, 2.0, reduce, "tf32"))
    # with gradients: amin / amax's backward calls the packed operator again (argmin / argmax)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    torch.library.opcheck(torch.ops.convred.conv2d_reduce_packed,
                          (xg, wg, packed, b, [1, 1], [0, 0], [1, 1], 1, 2.0, reduce, "tf32"))


def gradcheck_inputs(device, reduce):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 6, 5, generator=g, dtype=torch.float64).to(device).requires_grad_()
    w = torch.randn(4, 3, 3, 2, generator=g, dtype=torch.float64).to(device).requires_grad_()
    b = torch.randn(4, generator=g, dtype=torch.float64).to(device).requires_grad_()
    return x, w, b


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("reduce", ["min", "max", "amin", "amax", "sum", "mean", "argmin"])
def test_gradcheck_float64(device, reduce):
    x, w, b = gradcheck_inputs(device, reduce)

    def f(x, w, b):
        return OP(x, w, b, [1, 2], [1, 0], [1, 1], 1, -1.5, reduce, "ieee")[0]

    assert torch.autograd.gradcheck(f, (x, w, b), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_gradcheck_groups(device):
    x, w, b = gradcheck_inputs(device, "min")
    x = torch.randn(1, 4, 5, 5, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: OP(x, w, None, [1, 1], [1, 1], [2, 1], 2, 2.0, "max", "ieee")[0],
                                    (x, w), eps=1e-6, atol=1e-6)


def test_backward_matches_pytorch_min():
    """The min gradient goes to the selected channel only, as torch.min(t, dim)'s."""
    x, w, b = (t.requires_grad_() for t in good("cpu", torch.float64))
    v, _ = convred.conv2d_reduce(x, w, b, scale=2.0, reduce="min", padding=1)
    gy = torch.randn_like(v)
    gx, gw, gb = torch.autograd.grad(v, (x, w, b), gy)
    r = torch.min(F.conv2d(x, w, b, padding=1) * 2.0, dim=1, keepdim=True).values
    rx, rw, rb = torch.autograd.grad(r, (x, w, b), gy)
    torch.testing.assert_close((gx, gw, gb), (rx, rw, rb))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("reduce", ["amin", "amax"])
def test_gradcheck_packed_float64(device, reduce):
    """The packed operator's amin / amax backward (it recomputes the index with the packed operator)."""
    x, w, b = gradcheck_inputs(device, reduce)
    # float64 (math ieee) has no packed filter: pack_filter returns an empty one, as where the wgmma kernel
    # does not serve a problem
    packed = torch.ops.convred.pack_filter(w.detach(), list(x.shape), [1, 2], [1, 0], [1, 1], 1, "ieee")
    assert packed.numel() == 0

    def f(x, w, b):
        return torch.ops.convred.conv2d_reduce_packed(x, w, packed, b, [1, 2], [1, 0], [1, 1], 1, -1.5, reduce,
                                                      "ieee")[0]

    assert torch.autograd.gradcheck(f, (x, w, b), eps=1e-6, atol=1e-6)


# (dtype, math) pairs the operator accepts: every math for 32- and 16-bit x, ieee for float64 (the CPU
# reference checks the math and computes exactly)
DTYPE_MATH = [pytest.param(d, m, id=f"{str(d).split('.')[-1]}-{m}")
              for d in convred.DTYPES for m in (("ieee", "accurate") if d == torch.float64 else convred.MATHS)]


@pytest.mark.parametrize("dtype,math", DTYPE_MATH)
@pytest.mark.parametrize("reduce", ["amin", "amax"])
@pytest.mark.parametrize("scale", [1.0, -2.0])
def test_amin_amax_special_values_cpu(dtype, math, reduce, scale):
    """Parity with torch.amin / torch.amax on NaN, +-inf, ties and +-0 (the conv output is x itself), and
    the values of min / max."""
    x, w = special_case(dtype, "cpu")
    vals, idx = OP(x, w, None, [1, 1], [0, 0], [1, 1], 5, scale, reduce, math)
    want = getattr(torch, reduce)(x.double() * scale, 1, keepdim=True)
    assert vals.dtype == dtype and vals.shape == want.shape
    assert idx.dtype == torch.int64 and idx.numel() == 0
    same = (vals.double() == want) | (vals.isnan() & want.isnan())  # == : -0.0 equals +0.0
    assert bool(same.all()), f"values {vals.flatten().tolist()} != {want.flatten().tolist()}"
    plain, _ = OP(x, w, None, [1, 1], [0, 0], [1, 1], 5, scale, reduce[1:], math)
    assert bool(((vals == plain) | (vals.isnan() & plain.isnan())).all())


@pytest.mark.parametrize("dtype", convred.DTYPES)
@pytest.mark.parametrize("reduce", ["amin", "amax"])
def test_amin_amax_match_torch_cpu(dtype, reduce):
    """Random data in every dtype: torch.amin / torch.amax of the float64 conv (rounded to the dtype), and
    exactly min / max's values."""
    x, w, b = good("cpu", dtype)
    for scale, padding, layout in ((2.0, (1, 1), torch.contiguous_format), (-0.5, (0, 2), torch.channels_last)):
        xl = x.contiguous(memory_format=layout)
        vals, idx = OP(*args_of(xl, w, b, padding=padding, scale=scale, reduce=reduce))
        want = getattr(torch, reduce)(conv_ref(x, w, b, (1, 1), padding, (1, 1), 1, scale), 1, keepdim=True)
        assert idx.numel() == 0 and vals.dtype == dtype and vals.is_contiguous()
        torch.testing.assert_close(vals, want.to(dtype))
        plain, _ = OP(*args_of(xl, w, b, padding=padding, scale=scale, reduce=reduce[1:]))
        assert torch.equal(vals, plain)


@pytest.mark.parametrize("reduce", ["amin", "amax"])
def test_amin_amax_backward(reduce):
    """The gradient goes to the selected channel (min / max's gradient, and torch.amin / torch.amax's away
    from ties), and the backward makes exactly one more operator call, with argmin / argmax."""
    x, w, b = (t.requires_grad_() for t in good("cpu", torch.float64))
    with ConvredOpLog() as log:
        v = convred.conv2d_reduce(x, w, b, scale=2.0, reduce=reduce, padding=1)
    assert isinstance(v, torch.Tensor) and log.calls == [("conv2d_reduce", reduce)]
    gy = torch.randn_like(v)
    with ConvredOpLog() as log:
        got = torch.autograd.grad(v, (x, w, b), gy)
    assert log.calls == [("conv2d_reduce", "arg" + reduce[1:])]
    plain, _ = convred.conv2d_reduce(x, w, b, scale=2.0, reduce=reduce[1:], padding=1)
    torch.testing.assert_close(got, torch.autograd.grad(plain, (x, w, b), gy), rtol=0, atol=0)
    r = getattr(torch, reduce)(F.conv2d(x, w, b, padding=1) * 2.0, dim=1, keepdim=True)
    torch.testing.assert_close(got, torch.autograd.grad(r, (x, w, b), gy))
    # only x needs a gradient: the same
    with ConvredOpLog() as log:
        v = convred.conv2d_reduce(x, w.detach(), None, reduce=reduce)
        torch.autograd.grad(v, (x,), gy[..., 1:-1, 1:-1])
    assert log.calls == [("conv2d_reduce", reduce), ("conv2d_reduce", "arg" + reduce[1:])]


@pytest.mark.parametrize("reduce", ["amin", "amax"])
def test_amin_amax_tie_gradient_to_lowest_index(reduce):
    """Among tied channels all of the gradient goes to the lowest index, as min / max's (torch.amin would
    split it evenly)."""
    # one row per pixel, one column per channel: min ties at pixels 0 (channels 0, 1, 2) and 2 (1, 2), max
    # ties at pixel 2 (0, 3)
    x = torch.tensor([[1.0, 1.0, 1.0, 2.0], [3.0, -1.0, 2.0, 2.0], [3.0, 0.5, 0.5, 3.0]], dtype=torch.float64)
    x = x.t().reshape(1, 4, 1, 3).contiguous().requires_grad_()
    w = torch.ones(4, 1, 1, 1, dtype=torch.float64)
    v = convred.conv2d_reduce(x, w, None, groups=4, reduce=reduce)
    (gx,) = torch.autograd.grad(v, (x,), torch.ones_like(v))
    plain, idx = convred.conv2d_reduce(x, w, None, groups=4, reduce=reduce[1:])
    assert idx.flatten().tolist() == ([0, 1, 1] if reduce == "amin" else [3, 0, 0])
    (want,) = torch.autograd.grad(plain, (x,), torch.ones_like(plain))
    assert torch.equal(gx, want)
    assert torch.equal(gx, torch.zeros_like(gx).scatter_(1, idx, 1.0))
    assert gx.sum().item() == 3.0 and int((gx != 0).sum()) == 3


class SeedLike(torch.nn.Module):
    def __init__(self, math="ieee"):
        super().__init__()
        conv = torch.nn.Conv2d(4, 8, 3)
        self.inner = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min", math=math)

    def forward(self, x):
        return torch.relu(self.inner(x)) + 1.0


@pytest.mark.parametrize("reduce", ["min", "sum"])
def test_torch_compile_fullgraph_cpu(reduce):
    torch._dynamo.reset()
    m = SeedLike()
    m.inner.reduce = reduce
    x = torch.randn(2, 4, 9, 10, requires_grad=True)
    eager = m(x)
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    torch.testing.assert_close(out, eager)
    out.sum().backward()
    g = x.grad.clone()
    x.grad = None
    eager.sum().backward()
    torch.testing.assert_close(g, x.grad)


def test_torch_compile_dynamic_shapes_cpu():
    torch._dynamo.reset()
    m = SeedLike()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager", dynamic=True)
    for n, h in ((1, 8), (3, 11)):
        x = torch.randn(n, 4, h, 9)
        torch.testing.assert_close(compiled(x), m(x))


def test_module_matches_conv2d_and_state_dict():
    conv = torch.nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), bias=True)
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=-0.5, reduce="max")
    assert list(m.state_dict().keys()) == list(conv.state_dict().keys()) == ["weight", "bias"]
    assert m.weight is conv.weight and m.bias is conv.bias
    x = torch.randn(2, 4, 9, 9)
    torch.testing.assert_close(m(x), torch.amax(conv(x) * -0.5, dim=1, keepdim=True))
    m2 = convred.nn.Conv2dReduce(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), scale=-0.5,
                                 reduce="max")
    assert [(k, v.shape) for k, v in m2.state_dict().items()] == [(k, v.shape) for k, v in conv.state_dict().items()]
    m2.load_state_dict(conv.state_dict())
    torch.testing.assert_close(m2(x), m(x))
    conv.load_state_dict(m2.state_dict())
    nb = convred.nn.Conv2dReduce(4, 6, 3, bias=False)
    assert list(nb.state_dict().keys()) == ["weight"] and nb.bias is None
    assert "cpu-reference" in m.kernel_for(x)


def test_module_options():
    conv = torch.nn.Conv2d(4, 6, 3, padding="same", bias=False)
    m = convred.nn.Conv2dReduce.from_conv(conv, reduce="min", return_indices=True)
    x = torch.randn(1, 4, 5, 5)
    v, i = m(x)
    r = torch.min(conv(x), dim=1, keepdim=True)
    torch.testing.assert_close(v, r.values)
    assert torch.equal(i, r.indices)
    # a model converted to channels_last has channels_last weights: still served
    m = m.to(memory_format=torch.channels_last)
    v2, _ = m(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(v2, v)
    with pytest.raises(ValueError, match="padding_mode"):
        convred.nn.Conv2dReduce.from_conv(torch.nn.Conv2d(4, 6, 3, padding_mode="reflect"))
    with pytest.raises(ValueError, match="'math'"):
        convred.nn.Conv2dReduce.from_conv(conv, math="fp8")
    for groups in (0, -1, 1.5):  # named, not a ZeroDivisionError or a negative dimension
        with pytest.raises(ValueError, match="'groups'"):
            convred.nn.Conv2dReduce(4, 6, 3, groups=groups)


@pytest.mark.parametrize("reduce", ["min", "max"])
def test_module_min_max_without_indices_runs_amin_amax(reduce):
    """return_indices=False: the module calls the operator with amin / amax (values only) and gives min /
    max's values and gradients; its reduce, repr, state_dict and kernel_for are unchanged. With
    return_indices=True it calls min / max."""
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=-0.5, reduce=reduce)
    mi = convred.nn.Conv2dReduce.from_conv(conv, scale=-0.5, reduce=reduce, return_indices=True)
    x = torch.randn(2, 4, 7, 9, requires_grad=True)
    with ConvredOpLog() as log:
        y = m(x)
    assert log.calls == [("conv2d_reduce", "a" + reduce)]
    assert isinstance(y, torch.Tensor) and y.shape == (2, 1, 7, 9)
    with ConvredOpLog() as log:
        v, i = mi(x)
    assert log.calls == [("conv2d_reduce", reduce)]
    assert torch.equal(y, v)  # the values of before (the op's min / max)
    assert m.reduce == reduce and m.return_indices is False
    assert f"reduce='{reduce}'" in repr(m) and repr(m) == repr(mi)
    assert list(m.state_dict().keys()) == ["weight", "bias"]
    assert "cpu-reference" in m.kernel_for(x)
    gy = torch.randn_like(y)
    got = torch.autograd.grad(y, (x, conv.weight, conv.bias), gy)
    want = torch.autograd.grad(v, (x, conv.weight, conv.bias), gy)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # a module built with the constructor, and one switched to return_indices afterwards
    m2 = convred.nn.Conv2dReduce(4, 6, 3, padding=1, scale=-0.5, reduce=reduce)
    m2.load_state_dict(conv.state_dict())
    with ConvredOpLog() as log:
        torch.testing.assert_close(m2(x), y, rtol=0, atol=0)
        m2.return_indices = True
        v2, i2 = m2(x)
    assert log.calls == [("conv2d_reduce", "a" + reduce), ("conv2d_reduce", reduce)]
    assert torch.equal(i2, i)


def test_module_trains():
    torch.manual_seed(0)
    m = convred.nn.Conv2dReduce(3, 5, 3, padding=1, scale=2.0, reduce="mean")
    ref = torch.nn.Conv2d(3, 5, 3, padding=1)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 3, 6, 6)
    for mod, out in ((m, m(x)), (ref, (ref(x) * 2.0).mean(1, keepdim=True))):
        out.square().sum().backward()
    torch.testing.assert_close(m.weight.grad, ref.weight.grad)
    torch.testing.assert_close(m.bias.grad, ref.bias.grad)


def test_default_math_follows_cudnn_allow_tf32():
    """math=None resolves to PyTorch's own conv math: "tf32" while torch.backends.cudnn.allow_tf32 is True
    (PyTorch's default), "accurate" while it is False; "ieee" for float64."""
    old = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert convred.default_math() == "tf32"
        assert convred.default_math(torch.float16) == "tf32"
        assert convred.default_math(torch.float64) == "ieee"
        torch.backends.cudnn.allow_tf32 = False
        assert convred.default_math() == "accurate"
        assert convred.default_math(torch.float64) == "ieee"
    finally:
        torch.backends.cudnn.allow_tf32 = old
    m = convred.nn.Conv2dReduce(3, 4, 3)
    assert m.math is None and "math=None" in repr(m)
    x = torch.rand(1, 3, 5, 5)
    y = m(x)  # CPU reference: any math gives the exact answer
    r = torch.min(F.conv2d(x.double(), m.weight.double(), m.bias.double()), 1, keepdim=True).values
    torch.testing.assert_close(y.double(), r, rtol=1e-5, atol=1e-6)
    assert convred.conv2d_reduce(x, m.weight, m.bias, reduce="min")[0].shape == (1, 1, 3, 3)
