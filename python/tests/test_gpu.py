"""CUDA kernels against float64 references: every reduce x dtype x math, layouts, strides/padding/groups,
NaN / ties / +-0 / +-inf, the packed (wgmma) path and its cache, streams, torch.compile with inductor.
All marked `gpu` (skipped without a CUDA device); tensor-core maths need sm_80+."""
import pytest
import torch

import convred
from conftest import sm
from reference import ConvredOpLog, conv_ref, reduce_ref, rel_err, special_case, tol

pytestmark = pytest.mark.gpu
OP = torch.ops.convred.conv2d_reduce
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def maths_for(dtype):
    return ["ieee", "accurate"] if dtype == torch.float64 else ["ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate"]


# (dtype, math) pairs that run (float64 runs math ieee only; other maths are an error, tested in test_api)
DTYPE_MATH = [pytest.param(d, m, id=f"{str(d).split('.')[-1]}-{m}") for d in DTYPES for m in maths_for(d)]
# not tf32x3 in the special-value test: its split small = v - tf32(v) is inf - inf = NaN for an infinite
# input, so +-inf inputs give NaN there (a property of 3xTF32, not checked here)
DTYPE_MATH_SPECIAL = [p for p in DTYPE_MATH if p.values[1] != "tf32x3"]


def need_tc(math):
    if math not in ("ieee", "accurate") and sm() < 80:
        pytest.skip("tensor-core maths need compute capability 8.0+")


def make(shape_x, shape_w, dtype, seed=0, bias=True, layout="nchw"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape_x, generator=g, dtype=torch.float64).to(dtype)
    w = ((torch.rand(shape_w, generator=g, dtype=torch.float64) - 0.5) * 0.2).to(dtype)
    b = ((torch.rand(shape_w[0], generator=g, dtype=torch.float64) - 0.5) * 0.2).to(dtype) if bias else None
    x = x.cuda()
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    return x, w.cuda(), None if b is None else b.cuda()


def check(x, w, b, stride, padding, dilation, groups, scale, reduce, math):
    vals, idx = OP(x, w, b, list(stride), list(padding), list(dilation), groups, scale, reduce, math)
    out = conv_ref(x, w, b, stride, padding, dilation, groups, scale)
    rv, ri = reduce_ref(out, reduce)
    assert vals.shape == rv.shape and vals.dtype == x.dtype and vals.device == x.device
    err = rel_err(vals, rv)
    assert err <= tol(math, x.dtype), f"rel err {err:.3g} > {tol(math, x.dtype):.3g}"
    if ri is not None:
        assert idx.shape == ri.shape and idx.dtype == torch.int64
        # the chosen channel attains the extreme within the math's accuracy (near-ties may differ)
        picked = out.gather(1, idx)
        scale_ref = out.abs().amax().clamp_min(1e-30)
        assert ((picked - rv).abs() / scale_ref).max().item() <= 4 * tol(math, x.dtype)
        if math == "ieee" and x.dtype == torch.float64:
            assert torch.equal(idx, ri)
    else:
        assert idx.numel() == 0
    return vals, idx


@pytest.mark.parametrize("dtype,math", DTYPE_MATH)
@pytest.mark.parametrize("reduce", convred.REDUCES)
def test_every_reduce_dtype_math(dtype, math, reduce):
    need_tc(math)
    x, w, b = make((2, 16, 12, 20), (24, 16, 3, 3), dtype)
    check(x, w, b, (1, 1), (1, 1), (1, 1), 1, 2.0, reduce, math)


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("math", ["ieee", "tf32", "tf32x3", "bf16", "fp16"])
@pytest.mark.parametrize(
    "geom",
    [((1, 1), (0, 0), (1, 1), 1, (3, 3)), ((2, 1), (1, 2), (1, 1), 1, (3, 5)), ((1, 1), (2, 2), (2, 1), 1, (3, 3)),
     ((1, 2), (0, 1), (1, 1), 4, (3, 3)), ((1, 1), (0, 0), (1, 1), 1, (1, 1))],
    ids=["3x3", "stride-pad", "dilation", "groups4", "1x1"])
def test_geometry_and_layout(layout, math, geom):
    need_tc(math)
    stride, padding, dilation, groups, (R, S) = geom
    x, w, b = make((3, 8, 13, 16), (12, 8 // groups, R, S), torch.float32, seed=3, layout=layout)
    check(x, w, b, stride, padding, dilation, groups, -1.5, "min", math)
    check(x, w, None, stride, padding, dilation, groups, 1.0, "sum", math)


@pytest.mark.parametrize("K", [1, 3, 33, 130])
def test_odd_channel_counts(K):
    x, w, b = make((2, 5, 9, 12), (K, 5, 3, 3), torch.float32, seed=K)
    for math in ("ieee", "tf32"):
        need_tc(math)
        check(x, w, b, (1, 1), (1, 1), (1, 1), 1, 2.0, "argmax", math)


@pytest.mark.parametrize("dtype,math", DTYPE_MATH_SPECIAL)
@pytest.mark.parametrize("reduce", ["min", "max", "argmin", "argmax", "amin", "amax"])
@pytest.mark.parametrize("scale", [1.0, -2.0])
def test_nan_ties_zero_inf(dtype, math, reduce, scale):
    """amin / amax: parity with torch.amin / torch.amax (reduce_ref calls them) on NaN, +-inf, ties, +-0."""
    need_tc(math)
    x, w = special_case(dtype)
    vals, idx = OP(x, w, None, [1, 1], [0, 0], [1, 1], 5, scale, reduce, math)
    rv, ri = reduce_ref(x.double() * scale, reduce)
    if ri is None:
        assert idx.numel() == 0 and idx.dtype == torch.int64
    else:
        assert torch.equal(idx, ri), f"indices {idx.flatten().tolist()} != {ri.flatten().tolist()}"
    same = (vals.double() == rv) | (vals.isnan() & rv.isnan())
    assert bool(same.all()), f"values {vals.flatten().tolist()} != {rv.flatten().tolist()}"


def test_sum_mean_inf_nan():
    x, w = special_case(torch.float32)
    for reduce in ("sum", "mean"):
        vals, _ = OP(x, w, None, [1, 1], [0, 0], [1, 1], 5, 1.0, reduce, "ieee")
        ref = x.double().sum(1, keepdim=True) / (5 if reduce == "mean" else 1)
        assert torch.equal(vals.isnan(), ref.isnan())
        ok = ~ref.isnan()
        torch.testing.assert_close(vals.double()[ok], ref[ok])


def test_matches_pytorch_seed_like():
    """The seed model's expression, scaled down: convred tf32 / ieee vs torch.min(conv*2) in float64."""
    torch.manual_seed(42)
    conv = torch.nn.Conv2d(64, 128, 3).cuda()
    x = torch.rand(2, 64, 64, 64, device="cuda")
    ref = torch.min(torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double()) * 2.0, 1,
                    keepdim=True).values
    for math, bound in (("ieee", 1e-5), ("tf32x3", 1e-5), ("accurate", 1e-5), ("tf32", 1e-3), ("bf16", 1e-2),
                        ("fp16", 1e-2)):
        need_tc(math)
        m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min", math=math)
        with torch.no_grad():
            y = m(x)
        assert rel_err(y, ref) <= bound, (math, rel_err(y, ref))


def test_module_packs_once_and_repacks_on_change():
    need_tc("tf32")
    conv = torch.nn.Conv2d(16, 64, 3).cuda()  # 64 output channels: the wgmma kernel (packed), not the narrow tile
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min", math="tf32")
    x = torch.rand(2, 16, 20, 24, device="cuda")
    kernel = m.kernel_for(x)
    if sm() == 90:
        assert kernel.startswith(("wgmma tf32", "mma.sync tf32")), kernel
    else:
        assert kernel.startswith("mma.sync tf32"), kernel
    with torch.no_grad():
        y1 = m(x)
        m(x)
        m(x)
    served = kernel.startswith("wgmma")
    assert m.pack_count == 1 or not served
    ref = lambda: torch.min(conv(x).double() * 2.0, 1, keepdim=True).values  # noqa: E731
    assert rel_err(y1, ref()) <= 1e-3
    with torch.no_grad():
        conv.weight.mul_(-1.0)  # in place: _version changes, data_ptr does not
        y2 = m(x)
    assert m.pack_count == (2 if served else 0)
    assert rel_err(y2, ref()) <= 1e-3
    x2 = torch.rand(1, 16, 12, 16, device="cuda")  # another input size: packed again
    served2 = m.kernel_for(x2).startswith("wgmma")
    with torch.no_grad():
        y3 = m(x2)
    assert rel_err(y3, torch.min(conv(x2).double() * 2.0, 1, keepdim=True).values) <= 1e-3
    assert m.pack_count == (2 if served else 0) + (1 if served2 else 0)
    s = torch.cuda.Stream()  # another stream: packed again on it, the same answer
    with torch.cuda.stream(s), torch.no_grad():
        y4 = m(x2)
    s.synchronize()
    assert torch.equal(y4, y3)
    assert m.pack_count == (2 if served else 0) + (2 if served2 else 0)


def test_packed_op_checks_size():
    if sm() != 90:
        pytest.skip("the wgmma packed path needs sm_90")
    x, w, b = make((1, 16, 12, 16), (64, 16, 3, 3), torch.float32)  # the wgmma kernel's packed filter (K > 32)
    small = torch.empty(16, dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="'packed'"):
        torch.ops.convred.conv2d_reduce_packed(x, w, small, b, [1, 1], [0, 0], [1, 1], 1, 1.0, "min", "tf32")


def test_current_stream_and_device_guard():
    x, w, b = make((2, 8, 16, 16), (16, 8, 3, 3), torch.float32)
    s = torch.cuda.Stream()
    ref, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", "ieee")
    with torch.cuda.stream(s):
        y, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", "ieee")
    s.synchronize()
    assert torch.equal(y, ref)
    if torch.cuda.device_count() > 1:
        x1, w1, b1 = x.to("cuda:1"), w.to("cuda:1"), b.to("cuda:1")
        with torch.cuda.device(0):
            y1, _ = OP(x1, w1, b1, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", "ieee")
        assert y1.device == torch.device("cuda:1")
        assert torch.equal(y1.cpu(), ref.cpu())


def test_misaligned_x_falls_back():
    """x at an offset that is 4- but not 16-byte aligned: where the plan's wgmma tiles read x with TMA they
    fall back to mma.sync (the description says so), flat tiles and gathered x need no fallback; same answer."""
    need_tc("tf32")
    base = torch.rand(1 * 8 * 12 * 16 + 1, device="cuda")
    x = base[1:].view(1, 8, 12, 16)
    w = torch.rand(64, 8, 3, 3, device="cuda") - 0.5  # K 64: the wgmma kernel's plan, not the narrow tile
    d = convred.kernel_name(x, w, math="tf32")
    assert "mma.sync" in d or ("flat " in d or "x gathered" in d), d
    check(x, w, None, (1, 1), (0, 0), (1, 1), 1, 1.0, "min", "tf32")


@pytest.mark.parametrize("math", ["ieee", "tf32"])
def test_torch_compile_inductor_fullgraph(math):
    need_tc(math)
    torch._dynamo.reset()
    conv = torch.nn.Conv2d(16, 32, 3).cuda()
    model = torch.nn.Sequential(convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min", math=math),
                                torch.nn.ReLU())
    x = torch.rand(2, 16, 20, 24, device="cuda")
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)(x)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


def test_backward_cuda_matches_pytorch():
    x, w, b = make((2, 8, 10, 12), (16, 8, 3, 3), torch.float64)
    for t in (x, w, b):
        t.requires_grad_()
    for reduce in ("min", "max", "amin", "amax", "sum", "mean"):
        v, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, 2.0, reduce, "ieee")
        gy = torch.randn_like(v)
        got = torch.autograd.grad(v, (x, w, b), gy)
        out = torch.nn.functional.conv2d(x, w, b, padding=1) * 2.0
        r = {"min": lambda: out.min(1, keepdim=True).values, "max": lambda: out.max(1, keepdim=True).values,
             "amin": lambda: out.amin(1, keepdim=True), "amax": lambda: out.amax(1, keepdim=True),
             "sum": lambda: out.sum(1, keepdim=True), "mean": lambda: out.mean(1, keepdim=True)}[reduce]()
        want = torch.autograd.grad(r, (x, w, b), gy)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype,math", DTYPE_MATH)
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_amin_amax_values_equal_min_max(dtype, math, layout):
    """The values-only kernels (op::min / op::max) give min / max's values bit for bit: the same conv
    accumulations, and selecting the extreme is exact (finite random data: no NaN, no zero)."""
    need_tc(math)
    x, w, b = make((2, 16, 12, 20), (24, 16, 3, 3), dtype, seed=7, layout=layout)
    for plain, values_only in (("min", "amin"), ("max", "amax")):
        for scale in (2.0, -0.5):
            ref, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, scale, plain, math)
            vals, idx = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, scale, values_only, math)
            assert idx.numel() == 0
            assert torch.equal(vals, ref), (plain, scale)


@pytest.mark.parametrize("math", ["ieee", "tf32"])
@pytest.mark.parametrize("reduce", ["min", "max"])
def test_module_without_indices_runs_amin_amax(math, reduce):
    """Conv2dReduce(reduce="min"/"max", return_indices=False) calls the operator with amin / amax (the
    packed operator on the wgmma path): the same values as before, and the same gradients (its backward
    recomputes the index with one more argmin / argmax call)."""
    need_tc(math)
    torch.manual_seed(5)
    conv = torch.nn.Conv2d(16, 64, 3).cuda()  # 64 output channels: the wgmma path, not the narrow tile
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce=reduce, math=math)
    mi = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce=reduce, math=math, return_indices=True)
    x = torch.rand(2, 16, 20, 24, device="cuda", requires_grad=True)
    op_name = "conv2d_reduce_packed"  # on CUDA the module runs the packed operator (its cached packed filter)
    with ConvredOpLog() as log:
        y = m(x)
    assert log.calls == [(op_name, "a" + reduce)]
    assert isinstance(y, torch.Tensor) and m.reduce == reduce and f"reduce='{reduce}'" in repr(m)
    with ConvredOpLog() as log:
        v, i = mi(x)
    assert log.calls == [(op_name, reduce)]
    assert torch.equal(y, v)
    gy = torch.randn_like(y)
    with ConvredOpLog() as log:
        got = torch.autograd.grad(y, (x, conv.weight, conv.bias), gy)
    assert log.calls == [(op_name, "arg" + reduce)]  # the one extra fused forward of the backward
    want = torch.autograd.grad(v, (x, conv.weight, conv.bias), gy)
    torch.testing.assert_close(got, want)


def test_default_math_follows_pytorch_tf32_switch():
    """math=None: "tf32" while torch.backends.cudnn.allow_tf32 is True (PyTorch's default), "accurate" (error
    vs float64 <= 1e-6 class) while it is False; the module reads the switch at each forward."""
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(32, 48, 3, padding=1).cuda()
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min")
    x = torch.randn(2, 32, 24, 20, device="cuda")
    ref = torch.min(torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double(), padding=1)
                    * 2.0, 1, keepdim=True).values
    old = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert convred.default_math() == "tf32"
        with torch.no_grad():
            y_tf32 = m(x)
        assert m.kernel_for(x) == convred.kernel_name(x, conv.weight, padding=1, math="tf32")
        torch.backends.cudnn.allow_tf32 = False
        assert convred.default_math() == "accurate"
        with torch.no_grad():
            y_acc = m(x)
        assert "math::accurate" in m.kernel_for(x) or sm() < 80, m.kernel_for(x)
    finally:
        torch.backends.cudnn.allow_tf32 = old
    assert rel_err(y_tf32, ref) <= tol("tf32", torch.float32)
    assert rel_err(y_acc, ref) <= 1e-6, rel_err(y_acc, ref)


def test_plan_description_is_the_planners():
    """kernel_name is the planner's own description (no separate naming in the binding)."""
    x, w, b = make((4, 64, 32, 32), (128, 64, 3, 3), torch.float32)
    for math in ("tf32", "bf16", "accurate", "ieee"):
        need_tc(math)
        d = convred.kernel_name(x, w, padding=1, math=math)
        assert d.split(" ")[0] in ("wgmma", "mma.sync", "simt", "direct"), d
        if math == "accurate":
            assert "math::accurate" in d, d


def test_packed_workspace_is_never_written():
    """conv2d_reduce_packed binds the caller's prepared bytes (the packed filter) read only and gives each
    call a scratch of its own where the plan needs one (split, pass mode, flat tiles): repeated calls, on
    the current and on a side stream, agree with each other and with the unpacked operator, and never
    write the packed tensor. The shapes are ResNet-50 layer3.1 / layer4.1 3x3 at batch 1 (split into GEMM_K
    ranges on an H200) and layer3.1 at batch 32 (ping-pong in pass mode; accurate: flat tiles, split)."""
    for shape_x, shape_w in (((1, 256, 14, 14), (256, 256, 3, 3)), ((1, 512, 7, 7), (512, 512, 3, 3)),
                             ((32, 256, 14, 14), (256, 256, 3, 3))):
        x, w, b = make(shape_x, shape_w, torch.float32)
        for math in ("tf32", "accurate", "bf16"):
            need_tc(math)
            d = convred.kernel_name(x, w, padding=1, math=math)
            if sm() == 90:  # the plans that need scratch beside the packed filter
                assert d.startswith("wgmma") and ("split into" in d or "pass mode" in d), d
            packed = torch.ops.convred.pack_filter(w, list(x.shape), [1, 1], [1, 1], [1, 1], 1, math)
            if sm() == 90:
                assert packed.numel() > 0
            before = packed.clone()
            y1, _ = torch.ops.convred.conv2d_reduce_packed(x, w, packed, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", math)
            y2, _ = torch.ops.convred.conv2d_reduce_packed(x, w, packed, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", math)
            y3, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", math)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                y4, _ = torch.ops.convred.conv2d_reduce_packed(x, w, packed, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min",
                                                               math)
                y5, _ = OP(x, w, b, [1, 1], [1, 1], [1, 1], 1, 2.0, "min", math)
            s.synchronize()
            assert torch.equal(packed, before)
            assert torch.equal(y1, y2) and torch.equal(y1, y3), (shape_x, math)
            assert torch.equal(y1, y4) and torch.equal(y1, y5), (shape_x, math)
            check(x, w, b, (1, 1), (1, 1), (1, 1), 1, 2.0, "min", math)


@pytest.mark.parametrize("math", ["tf32", "accurate"])
def test_module_channels_last(math):
    """A channels_last x: the module packs for that layout (pack_filter's channels_last) and matches float64."""
    need_tc(math)
    torch.manual_seed(7)
    conv = torch.nn.Conv2d(32, 64, 3, padding=1).cuda()
    m = convred.nn.Conv2dReduce.from_conv(conv, scale=2.0, reduce="min", math=math)
    x = torch.randn(4, 32, 20, 20, device="cuda").contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        y = m(x)
        yc = m(x.contiguous())
    ref = torch.min(torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double(), padding=1) * 2.0,
                    1, keepdim=True).values
    assert rel_err(y, ref) <= tol(math, torch.float32)
    assert rel_err(yc, ref) <= tol(math, torch.float32)
