"""Cached environments holding real SGLang releases next to this interpreter's CPU torch.

Each release goes into its own directory (``pip install --no-deps --target``, release_envs), and the
pure-Python packages that importing ``sglang.srt.mem_cache.memory_pool`` needs into one shared directory:
found by importing it from 0.5.4, 0.5.10, 0.5.20 and 0.5.23 until nothing was missing. Two exceptions:
  * torchvision: its PyPI wheels link CUDA torch, so on the CPU torch under test they fail to import, and
    SGLang's model configs import it at module level; stand_ins/torchvision takes its place (it never runs:
    no copy path touches images);
  * 0.5.11-0.5.21 register a config name that newer transformers already has, so those releases get the
    transformers they pin (with a tokenizers and huggingface_hub it accepts) in their own directory.

Location: $XPU_STATE_COPY_SGLANG_ENVS, else $XDG_CACHE_HOME/xpu-state-copy/sglang-envs, else
.cache/sglang-envs in the repository.
"""
import os
import pathlib
import subprocess
import sys

import release_envs
from release_envs import EnvUnavailable  # noqa: F401 (for the tests)

STAND_INS = pathlib.Path(__file__).with_name("stand_ins")
DEPENDENCIES = (
    "aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated_doc==0.0.7 annotated_types==0.8.0 "
    "anyio==4.16.0 apache_tvm_ffi==0.1.11 attrs==26.1.0 certifi==2026.10.19.post1 compressed-tensors==0.20.1 "
    "dill==0.4.1 einops==0.8.2 fastapi==0.136.3 frozenlist==1.8.0 gguf==0.19.0 h11==0.16.0 httpcore==1.0.9 "
    "httpcore2==2.16.2 httpx==0.29.0 httpx2==2.16.2 huggingface_hub==2.4.0 idna==3.20 ipython==9.19.1 "
    "loguru==0.7.3 msgspec==0.23.0 multidict==7.2.1 openai==3.57.0 orjson==3.13.0 packaging==26.4 "
    "partial_json_parser==0.2.1.1.post7 propcache==0.5.4 psutil==7.2.2 pybase64==1.5.1 pydantic==2.14.4 "
    "pydantic_core==2.50.5 pyyaml==6.0.4 pyzmq==27.3.0 regex==2026.11.19 requests==2.34.2 safetensors==0.8.0 "
    "sentencepiece==0.2.3 sniffio==1.3.1 starlette==1.10.0 tokenizers==0.23.3 tqdm==4.70.1 "
    "traitlets==5.16.1 transformers==5.20.2 triton==3.8.0 truststore==0.10.5 typing_inspection==0.4.5 "
    "urllib3==2.8.0 xgrammar==0.2.8 yarl==1.25.1"
).split()
PINNED_TRANSFORMERS = {"0.5.11": "5.6.0", "0.5.12": "5.6.0", "0.5.13": "5.8.1", "0.5.14": "5.8.1",
                       **{f"0.5.{minor}": "5.12.1" for minor in range(15, 22)}}
# Every release whose MambaPool has copy_from (0.5.4 on); CI runs the newest.
RELEASES = [f"0.5.{minor}" for minor in range(4, 24)]
NEWEST = RELEASES[-1]


def cache_root() -> pathlib.Path:
    return release_envs.cache_root("XPU_STATE_COPY_SGLANG_ENVS", "sglang-envs")


def release_requirements(version):
    pinned = PINNED_TRANSFORMERS.get(version)
    extra = [f"transformers=={pinned}", "tokenizers==0.22.2", "huggingface_hub==1.33.0"] if pinned else []
    return [f"sglang=={version}", *extra]


def sglang_pythonpath(version: str) -> str:
    """PYTHONPATH for a subprocess that imports SGLang `version`; installs it first if not cached."""
    if sys.platform != "linux":
        raise EnvUnavailable("SGLang 0.5.11+ publishes Linux wheels only")
    release, deps = release_envs.install_release(cache_root(), DEPENDENCIES, f"sglang-{version}",
                                                 release_requirements(version))
    return os.pathsep.join([str(release), str(STAND_INS), str(deps)])


def run_in_sglang(version: str, args, extra_env=None, timeout=300):
    """Run `python args...` with SGLang `version` importable, on CPU; extra_env's None values unset."""
    env = dict(os.environ)
    env.update(PYTHONPATH=sglang_pythonpath(version), CUDA_VISIBLE_DEVICES="", **(extra_env or {}))
    env = {name: value for name, value in env.items() if value is not None}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout)
