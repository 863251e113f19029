"""pytest configuration: GPU tests carry the `gpu` marker and are skipped (reported as skipped) without a
CUDA device; tensor-core maths need compute capability 8.0 or newer."""
import pytest
import torch

HAS_CUDA = torch.cuda.is_available()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="no CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    if HAS_CUDA:
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        return f"convred: torch {torch.__version__} (CUDA {torch.version.cuda}); GPUs: {names}"
    return f"convred: torch {torch.__version__} (CUDA {torch.version.cuda}); no GPU: gpu tests skipped"


def sm():
    """Compute capability of the current device as 80, 90, ...; 0 without one."""
    if not HAS_CUDA:
        return 0
    major, minor = torch.cuda.get_device_capability()
    return 10 * major + minor
