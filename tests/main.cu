// Test runner for convred's doctest suites.
//
// Without a usable CUDA device, the test suite named "gpu" is excluded and reported as skipped (never as
// passed); the host suites run everywhere. Every doctest command-line option still applies
// (e.g. --test-case='*sanitizer*', --test-suite=gpu, --success, --list-test-cases).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>

int main(int argc, char** argv) {
  doctest::Context context;

  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    const char* why = err != cudaSuccess ? cudaGetErrorString(err) : "no devices";
    std::printf("convred: no CUDA device (%s): the 'gpu' test suite is SKIPPED (not run, not passed)\n", why);
    std::fflush(stdout);
    cudaGetLastError();  // clear the (non-sticky) error
    context.addFilter("test-suite-exclude", "gpu");
  } else {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
      std::printf("convred: CUDA device %d of %d: %s (sm_%d%d, %d SMs, %.1f GiB); running all suites\n", dev,
                  devices, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    } else {
      std::printf("convred: %d CUDA device(s); running all suites\n", devices);
    }
    std::fflush(stdout);
  }

  context.applyCommandLine(argc, argv);
  return context.run();
}
