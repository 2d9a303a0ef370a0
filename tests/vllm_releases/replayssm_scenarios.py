"""A FlashInfer ReplaySSM context (vLLM 0.34+) keeps vLLM's own spec-decode kernels with the plugin active.

With ReplaySSM, vLLM's fused copies leave the temporal and ring states to ReplaySSM: skipped after decoding
(SKIP_TEMPORAL_STATE_COPY) and copied without the token shift before (ZERO_TEMPORAL_TOKEN_BIAS). Our op does
neither, so the plugin hands such a context back to vLLM's method. Real ReplaySSM needs FlashInfer and a GPU;
here a context is initialised as usual (so the plugin has its plan) and then given a stand-in `replayssm`
(vLLM's copy methods only compare it with None). Imported by spec_decode_scenarios.py, which passes itself
in (`sd`) for its scenario helpers. Per random scenario, on copies of the same pools, three runs:
  * vllm: vLLM's own method, with the stand-in;
  * fallback: the plugin's method, with the stand-in;
  * ours: the plugin's method without it (our op).
The tests want vllm == fallback byte for byte with the kernel launched with the ReplaySSM flag on, ours
different in some scenario (else the comparison could not tell a fallback from our op), and exactly one
warning from the plugin that names ReplaySSM.
"""
import logging
import random
import traceback

import torch

# method -> (its kernel, the flag it sets for ReplaySSM contexts)
METHODS = {"run_fused_postprocess_align": ("postprocess_mamba_fused_kernel", "SKIP_TEMPORAL_STATE_COPY"),
           "run_fused_precopy": ("precopy_mamba_align_fused_kernel", "ZERO_TEMPORAL_TOKEN_BIAS")}


def applies(mu):
    return "replayssm" in getattr(mu.MambaSpecDecodeGPUContext, "__annotations__", {})


class StandInReplaySSM:
    """Takes the place of vLLM's ReplaySSMModelContext: present, so not None."""


class _LaunchRecorder:
    """Wraps a Triton kernel: notes the flag's value at each launch, then launches it."""

    def __init__(self, kernel, flag):
        self.kernel, self.flag, self.flags = kernel, flag, []

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def note_and_launch(*args, **kwargs):
            self.flags.append(kwargs.get(self.flag))
            return launch(*args, **kwargs)

        return note_and_launch


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _three_runs(mu, method, seed, layout, sd):
    kernel_name, flag = METHODS[method]
    s = sd.scenario_for(method, random.Random(seed), layout, mu)
    scenarios = {run: sd.clone_scenario(s) for run in ("vllm", "fallback", "ours")}
    contexts = {run: sd.build_context(mu, c, layout) for run, c in scenarios.items()}
    counts = {run: s.num_accepted.clone() for run in scenarios}
    cls = mu.MambaSpecDecodeGPUContext
    methods = {"vllm": getattr(cls, method).vllm_original, "fallback": getattr(cls, method),
               "ours": getattr(cls, method)}
    recorder = _LaunchRecorder(getattr(mu, kernel_name), flag)
    flags = {}
    setattr(mu, kernel_name, recorder)
    try:
        for run, context in contexts.items():
            if run != "ours":
                context.replayssm = StandInReplaySSM()
            sd.count_buffer(context).fill_(-7)
            arguments = list(sd.args_for(method, scenarios[run], None))
            if method != "run_fused_precopy":
                arguments[1] = counts[run]
            recorder.flags = []
            methods[run](context, *arguments)
            flags[run] = recorder.flags
    finally:
        setattr(mu, kernel_name, recorder.kernel)
    same = {run: sd.digest(scenarios[run]) == sd.digest(scenarios["vllm"]) and torch.equal(counts[run], counts["vllm"])
            and torch.equal(sd.count_buffer(contexts[run]), sd.count_buffer(contexts["vllm"])) for run in scenarios}
    return {"fallback_same_as_vllm": same["fallback"], "ours_same_as_vllm": same["ours"],
            "copied": sd.digest(scenarios["vllm"]) != sd.digest(s), "flags": flags,
            "fallback_planned": contexts["fallback"].__dict__.get("_xsc_plan") is not None}


def fallback_runs(mu, seeds, layouts, sd):
    """{"runs": {method/layout/seed: result}, "warnings": the plugin's ReplaySSM warnings}."""
    messages = _Messages()
    logger = logging.getLogger("vllm.xpu_state_copy")
    logger.addHandler(messages)
    results = {"runs": {}}
    try:
        for method in METHODS:
            for layout in layouts:
                for seed in range(seeds):
                    key = f"{method}/{layout}/{seed}"
                    try:
                        results["runs"][key] = _three_runs(mu, method, seed, layout, sd)
                    except Exception:
                        results["runs"][key] = {"crash": traceback.format_exc()[-3000:]}
    finally:
        logger.removeHandler(messages)
    results["warnings"] = [m for m in messages.messages if "ReplaySSM" in m]
    return results
