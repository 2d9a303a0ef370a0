"""The package's table of the torch each vLLM XPU build pins (xpu_state_copy/vllm/xpu_torch_pins.py), checked
against the `requirements/xpu.txt` of every release whose sdist the upstream tests fetch (upstream_tests.SDISTS,
fetched through pip's configured indexes and checked by sha256)."""
import re

import pytest

import upstream_tests
from test_vllm_releases import _unavailable
from xpu_state_copy.vllm.xpu_torch_pins import XPU_TORCH_PINS, pinned_torch

TORCH_PIN = re.compile(r"^torch\s*==\s*([0-9][^\s;#]*)", re.MULTILINE)


def xpu_torch_pin(version):
    """The torch release vLLM `version`'s requirements/xpu.txt pins, read from its sdist."""
    try:
        with upstream_tests.release_envs.install_lock(upstream_tests.vllm_envs.cache_root()):
            root = upstream_tests.tests_root(version)
    except upstream_tests.EnvUnavailable as why:
        _unavailable(f"vLLM {version}'s sdist: {why}")
    pins = TORCH_PIN.findall((root / upstream_tests.XPU_REQUIREMENTS).read_text())
    assert len(pins) == 1, f"vLLM {version}'s {upstream_tests.XPU_REQUIREMENTS} pins torch {pins}, not once"
    return pins[0].split("+", 1)[0]


@pytest.mark.parametrize("version", sorted(upstream_tests.SDISTS))
def test_the_table_names_the_torch_the_release_pins_for_xpu(version):
    assert version in XPU_TORCH_PINS, f"vLLM {version} is fetched by the tests but missing from XPU_TORCH_PINS"
    assert pinned_torch(version) == xpu_torch_pin(version)


def test_a_local_version_tag_reads_as_its_release():
    assert pinned_torch("0.34.0+xpu") == XPU_TORCH_PINS["0.34.0"] and pinned_torch("9.9.9") is None
