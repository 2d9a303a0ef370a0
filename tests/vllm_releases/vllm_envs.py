"""Cached environments holding real vLLM releases next to this interpreter's CPU torch.

Each release goes into its own directory with ``pip install --no-deps --target``, and the pure-Python
packages its ``vllm.v1.worker.mamba_utils`` needs to import (plus Triton, whose interpreter runs vLLM's own
copy kernel on CPU tensors) into one shared directory. Nothing is installed into the running interpreter,
so torch stays the one under test. The directories are put on PYTHONPATH of a subprocess only.

Location: $XPU_STATE_COPY_VLLM_ENVS, else $XDG_CACHE_HOME/xpu-state-copy/vllm-envs, else .cache/vllm-envs
in the repository. A directory is renamed into place only once complete, so an interrupted install is
redone, not trusted.
"""
import functools
import os
import pathlib
import subprocess
import sys

import release_envs
from release_envs import EnvUnavailable, run_pip  # noqa: F401 (EnvUnavailable: for the tests)

# Versions chosen so one set serves 0.22.1 through 0.34.0; found by importing mamba_utils until it
# stopped failing. Binary wheels where a package has one, but none of them pulls in a torch. The test
# interpreter's own packages beyond torch, numpy, setuptools and their requirements are hidden from the
# import check in
# test_vllm_releases (python -S), so a package missing here (Pillow and packaging were, once) fails that
# test instead of being borrowed from whatever else the interpreter holds.
DEPENDENCIES = (
    "aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated_doc==0.0.7 annotated_types==0.8.0 "
    "anyio==4.16.0 apache-tvm-ffi==0.1.11 attrs==26.1.0 cachetools==8.0.2 cbor2==6.3.0 "
    "certifi==2026.10.19.post1 cloudpickle==3.1.3 einops==0.8.2 fastapi==0.136.3 frozenlist==1.8.0 "
    "gguf==0.19.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 huggingface_hub==2.4.0 idna==3.20 "
    "llguidance==1.7.6 msgspec==0.23.0 multidict==7.2.1 openai==3.57.0 openai-harmony==0.0.8 "
    "opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 packaging==26.4 "
    "partial_json_parser==0.2.1.1.post7 pillow==13.0.0 prometheus_client==0.26.0 propcache==0.5.4 psutil==7.2.2 "
    "py-cpuinfo==9.0.0 pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 pyyaml==6.0.4 pyzmq==27.3.0 "
    "regex==2026.11.19 requests==2.34.2 safetensors==0.8.0 sniffio==1.3.1 starlette==1.10.0 "
    "tokenizers==0.23.3 tqdm==4.70.1 transformers==5.20.2 triton==3.8.0 truststore==0.10.5 "
    "typing_inspection==0.4.5 urllib3==2.8.0 uvloop==0.23.0 xgrammar==0.2.8 yarl==1.25.1"
).split()
# The newest release the plugin was verified against (every check of the release tests; the plugin's warning
# on a layout it does not know names the same range). A newer one is held to what the plugin promises for
# such a layout: it warns and changes nothing.
NEWEST_VERIFIED = "0.34.0"


def cache_root() -> pathlib.Path:
    return release_envs.cache_root("XPU_STATE_COPY_VLLM_ENVS", "vllm-envs")


@functools.lru_cache(maxsize=None)
def newest_on_index():
    """(the newest vLLM release on the index, None) from pip's own query, or (None, why) when it cannot say.
    Asked once per test session: both release-test modules collect their parameters from it."""
    try:
        line = run_pip(["index", "versions", "--timeout", "10", "--retries", "1", "vllm"], timeout=60).splitlines()[0]
        return line.split("(")[1].rstrip(")").strip(), None  # "vllm (X.Y.Z)"
    except EnvUnavailable as why:
        return None, str(why)
    except IndexError:
        return None, "pip index versions vllm printed no version"


def newest_vllm() -> str:
    """The newest vLLM release on the index, else the newest verified one."""
    return newest_on_index()[0] or NEWEST_VERIFIED


def vllm_pythonpath(version: str) -> str:
    """PYTHONPATH for a subprocess that imports vLLM `version`; installs it first if not cached."""
    if sys.version_info < (3, 10):
        raise EnvUnavailable("vLLM 0.23+ needs Python >= 3.10")
    if sys.platform != "linux":
        raise EnvUnavailable("vLLM publishes Linux wheels only")
    vllm, deps = release_envs.install_release(cache_root(), DEPENDENCIES, f"vllm-{version}", [f"vllm=={version}"])
    return os.pathsep.join([str(vllm), str(deps)])


def run_in_vllm(version: str, args, extra_env=None, timeout=300, cwd=None, extra_path=()):
    """Run `python args...` with vLLM `version` importable (and `extra_path` after it), on CPU, with Triton in
    interpreter mode."""
    env = dict(os.environ)
    env.update(PYTHONPATH=os.pathsep.join([vllm_pythonpath(version), *map(str, extra_path)]),
               CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1", **(extra_env or {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=cwd)
