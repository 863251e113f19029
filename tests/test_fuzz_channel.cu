// Fuzz runner (see fuzz.cuh): device::channel_reduce (float every op; double argmin/sum; half argmax/mean;
// bf16 min/argmin), with every kernel the run-time plan can pick (NCHW vector / scalar with channel
// slices, NHWC vector / scalar with 4 or 32 lanes, the pixel kernel). No test cases here:
// test_fuzz_gpu.cu drives.
#include <convred/device/channel_reduce.cuh>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

/// Name of the kernel the plan picks for this case (the same rule the entry point runs).
template <class T>
std::string plan_name(const channel_reduce_problem& cp, const T* x) {
  int sm = 0, tps = 0;
  device::detail::device_shape(sm, tps);
  const auto plan = device::make_channel_reduce_plan<kernel::channel_reduce_policy>(cp, x, sm, tps);
  const char* kinds[] = {"nchw_vector", "nchw_scalar", "nhwc_vector", "nhwc_scalar", "pixel"};
  std::string s = std::string("channel_reduce ") + kinds[static_cast<int>(plan.k)];
  if (plan.k == device::channel_reduce_plan::kind::nhwc_vector || plan.k == device::channel_reduce_plan::kind::nhwc_scalar)
    s += " lanes=" + std::to_string(plan.split);
  else if (plan.k != device::channel_reduce_plan::kind::pixel)
    s += plan.split > 1 ? " slices>1" : " slices=1";
  return s;
}

template <class T, class Op>
std::string check_channel(const fcase& c, const channel_reduce_problem& cp, const host_data<T>& d,
                          const std::vector<T>& y, const std::vector<std::int64_t>& idx) {
  const fuzz_epi he{{d.pcs.data()}, {c.scale}};
  const err_model em = error_model<T>(c.t, c.m);
  conv2d_problem shape;
  shape.N = cp.N, shape.C = cp.C, shape.H = cp.H, shape.W = cp.W, shape.x_layout = cp.x_layout;
  // channel ch of pixel m: v = e(x) (two roundings of the compute type: no conv, no operand rounding)
  auto at = [&](std::int64_t m, std::int64_t ch) {
    const std::int64_t n = m / (cp.H * cp.W), h = m / cp.W % cp.H, w = m % cp.W;
    const double xv = to_double(d.x[static_cast<std::size_t>(reference::x_offset(shape, n, ch, h, w))]);
    const double g = std::abs(double(d.pcs[static_cast<std::size_t>(ch)]) * double(c.scale));
    return chan_ref{apply_epilogue(he, xv, static_cast<int>(ch)), channel_error(em, g, std::abs(xv), 0, 0, 0, 0),
                    g * std::abs(xv)};
  };
  return check_reduction<T, Op>(c, em, cp.N * cp.H * cp.W, cp.C, at, y, idx);
}

template <class T, class Op>
result chan(const fcase& c, const run_opts& ro) {
  result res;
  channel_reduce_problem cp;
  cp.N = c.p.N, cp.C = c.p.C, cp.H = c.p.H, cp.W = c.p.W, cp.x_layout = c.p.x_layout;
  const host_data<T> d = make_data<T>(c);
  const auto ny = static_cast<std::size_t>(cp.y_elements());
  const T nanT = from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  const std::vector<T> x_img = image_of(d.x, d.x.size(), c.off_x, nanT);
  dbuf<T> x;
  dbuf<float> pcs;
  if (!x.init(x_img, c.off_x) || !pcs.init(image_of(d.pcs, d.pcs.size(), 0, 0.0f), 0)) {
    res.ok = false, res.why = "cudaMalloc / cudaMemcpy of the inputs failed";
    return res;
  }
  res.kernel = plan_name(cp, x.ptr()) + " " + name(c.t) + " " + name(c.o);
  const int slots = ro.determinism ? 4 : 1;
  const T poisonT = out_poison<T>(c);
  const std::int64_t poisonI = std::numeric_limits<std::int64_t>::min();
  const std::vector<T> y_img = image_of(std::vector<T>(), ny, c.off_y, poisonT);
  const std::vector<std::int64_t> i_img = image_of(std::vector<std::int64_t>(), ny, c.off_i, poisonI);
  std::vector<dbuf<T>> ys(static_cast<std::size_t>(slots));
  std::vector<dbuf<std::int64_t>> is(static_cast<std::size_t>(slots));
  for (int s = 0; s < slots; ++s)
    if (!ys[s].init(y_img, c.off_y) || (Op::has_index && !is[s].init(i_img, c.off_i))) {
      res.ok = false, res.why = "cudaMalloc / cudaMemcpy of the outputs failed";
      return res;
    }
  cudaDeviceSynchronize();
  const fuzz_epi de{{pcs.ptr()}, {c.scale}};
  streams st;
  std::vector<status> sts;
  for (int s = 0; s < slots; ++s)
    sts.push_back(device::channel_reduce(cp, x.ptr(), ys[s].ptr(), Op::has_index ? is[s].ptr() : nullptr, Op{}, de,
                                         st.s[s == 3 ? 1 : 0]));
  const cudaError_t e = cudaDeviceSynchronize();
  if (!launches_ok(sts, e, res)) return res;
  if (!equal_images(x.read(), x_img)) {
    res.ok = false, res.why = "x was modified";
    return res;
  }
  const std::vector<T> yimg = ys[0].read();
  const std::vector<std::int64_t> iimg = Op::has_index ? is[0].read() : std::vector<std::int64_t>();
  if (!written_exactly(yimg, ny, c.off_y, poisonT, "y", res.why) ||
      (Op::has_index && !written_exactly(iimg, ny, c.off_i, poisonI, "indices", res.why))) {
    res.ok = false;
    return res;
  }
  for (int s = 1; s < slots; ++s)
    if (!equal_images(ys[s].read(), yimg) || (Op::has_index && !equal_images(is[s].read(), iimg))) {
      res.ok = false;
      res.why = std::string("not deterministic: launch ") + std::to_string(s) + " differs bitwise from launch 0";
      return res;
    }
  const auto yo = static_cast<std::ptrdiff_t>(guard + c.off_y), io = static_cast<std::ptrdiff_t>(guard + c.off_i);
  const std::vector<T> y(yimg.begin() + yo, yimg.begin() + yo + static_cast<std::ptrdiff_t>(ny));
  std::vector<std::int64_t> idx;
  if (Op::has_index) idx.assign(iimg.begin() + io, iimg.begin() + io + static_cast<std::ptrdiff_t>(ny));
  res.why = check_channel<T, Op>(c, cp, d, y, idx);
  res.ok = res.why.empty();
  return res;
}

}  // namespace

result run_channel(const fcase& c, const run_opts& ro) {
  switch (c.t) {
    case elem::f32:
      switch (c.o) {
        case opk::min: return chan<float, op::min>(c, ro);
        case opk::max: return chan<float, op::max>(c, ro);
        case opk::sum: return chan<float, op::sum>(c, ro);
        case opk::mean: return chan<float, op::mean>(c, ro);
        case opk::argmin: return chan<float, op::argmin>(c, ro);
        case opk::argmax: return chan<float, op::argmax>(c, ro);
        case opk::range: return chan<float, test::range_op>(c, ro);
      }
      break;
    case elem::f64:
      if (c.o == opk::argmin) return chan<double, op::argmin>(c, ro);
      if (c.o == opk::sum) return chan<double, op::sum>(c, ro);
      break;
    case elem::f16:
      if (c.o == opk::argmax) return chan<__half, op::argmax>(c, ro);
      if (c.o == opk::mean) return chan<__half, op::mean>(c, ro);
      break;
    case elem::bf16:
      if (c.o == opk::min) return chan<__nv_bfloat16, op::min>(c, ro);
      if (c.o == opk::argmin) return chan<__nv_bfloat16, op::argmin>(c, ro);
      break;
  }
  result r;
  r.ok = false;
  r.why = "run_channel: combination not instantiated";
  return r;
}

}  // namespace convred::fuzz
