// Consumer check: compiled against an installed convred found with find_package(convred CONFIG), or
// fetched with FetchContent. One translation unit for one layer, as the README's "Use from C++" writes it:
// conv2d_reduce_plan<float> (math::accurate) run with op::min and epilogue::scale<float>, which
// instantiates every kernel the planner may pick for it (.ci/run prints how long it takes to compile: what
// a user's one-layer file costs). Runs only host code (argument validation, a plan for a described H200),
// so it needs no GPU.
#include <convred/convred.cuh>

#include <cstdio>
#include <string>

int main() {
  int failures = 0;
  auto expect = [&](const char* what, convred::status got, convred::status want) {
    std::printf("%-44s -> %s\n", what, convred::to_string(got));
    if (got != want) {
      std::printf("  expected: %s\n", convred::to_string(want));
      ++failures;
    }
  };

  // The version macros (convred/version.cuh, included by the umbrella header) and, with find_package, the
  // package version CMake reported: they must agree.
  const std::string version = std::to_string(CONVRED_VERSION_MAJOR) + "." + std::to_string(CONVRED_VERSION_MINOR) +
                              "." + std::to_string(CONVRED_VERSION_PATCH);
  static_assert(CONVRED_VERSION == CONVRED_VERSION_MAJOR * 100000 + CONVRED_VERSION_MINOR * 100 + CONVRED_VERSION_PATCH,
                "CONVRED_VERSION encodes MAJOR.MINOR.PATCH");
  std::printf("convred %s (CONVRED_VERSION %d)\n", version.c_str(), CONVRED_VERSION);
#ifdef CONSUMER_PACKAGE_VERSION
  if (version != CONSUMER_PACKAGE_VERSION) {
    std::printf("  package version %s differs from the headers' %s\n", CONSUMER_PACKAGE_VERSION, version.c_str());
    ++failures;
  }
#endif

  // The seed case: x (64, 64, 256, 256), W (128, 64, 3, 3) -> y (64, 1, 254, 254).
  convred::conv2d_problem p;
  p.N = 64, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3;
  expect("validate(seed problem)", convred::validate(p, sizeof(float)), convred::status::success);
  std::printf("  output (%lld, 1, %lld, %lld), %.1f GFLOP\n", static_cast<long long>(p.N),
              static_cast<long long>(p.P()), static_cast<long long>(p.Q()), p.flops() * 1e-9);

  convred::conv2d_problem bad = p;
  bad.R = bad.S = 300;  // kernel larger than the input
  expect("validate(300x300 kernel > input)", convred::validate(bad, sizeof(float)),
         convred::status::invalid_output_size);

  // Host-side argument checks of the fused entry point: refused before any CUDA call.
  const float* x = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
  const convred::status s = convred::device::conv2d_reduce<convred::default_policy>(
      p, x, w, static_cast<const float*>(nullptr), y, nullptr, convred::op::min{},
      convred::epilogue::scale<float>{2.0f}, cudaStream_t{nullptr});
  expect("device::conv2d_reduce(null pointers)", s, convred::status::null_pointer);

  // The README's call: a plan for the seed layer, here for a described H200 (no CUDA call), then run
  // before prepare: refused on the host (not_prepared), nothing launched.
  convred::device::conv2d_reduce_plan<float> plan(p, convred::device::device_info{9, 0, true, 132});
  expect("conv2d_reduce_plan<float>(seed, H200)", plan.state(), convred::status::success);
  std::printf("  %s\n", plan.description().c_str());
  if (plan.kernel() != convred::device::kernel_kind::wgmma) {
    std::printf("  expected the wgmma kernel for the seed layer on an H200\n");
    ++failures;
  }
  expect("plan.run before prepare",
         plan.run(x, nullptr, y, nullptr, convred::op::min{}, convred::epilogue::scale<float>{2.0f}, cudaStream_t{nullptr}),
         convred::status::not_prepared);

  if (failures) {
    std::printf("convred_consumer: %d check(s) FAILED\n", failures);
    return 1;
  }
  std::printf("convred_consumer: OK\n");
  return 0;
}
