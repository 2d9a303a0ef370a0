"""When the runtime pieces under the SYCL backend fail: the SYCL kernel cache, the OpenCL CPU runtime, the
run-time kernel compile; and many threads making the first call at once.

The SYCL runtime reads its environment once per process, so every scenario runs in a fresh interpreter
(the CHILD script below) and reports each copy it tried as one JSON line. In each, the native path
(XPU_STATE_COPY_BACKEND=cpu) must keep copying correctly in the same process.
"""
import json
import os
import random
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import xpu_state_copy
from batches import assert_matches, random_batch
from conftest import SYCL_ORIGIN, SYCL_REASON, synchronize

needs_sycl = pytest.mark.skipif(
    SYCL_ORIGIN is None and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1",
    reason=f"no SYCL backend: {SYCL_REASON}")

MARK = "XSC-RESULT "

# One batch_memcpy per backend named on the command line (misaligned, 20000 bytes, every arena byte
# checked); an exception is reported, not raised, so the next backend still runs in the same process.
CHILD = textwrap.dedent("""
    import json, os, sys
    import torch
    import xpu_state_copy as xsc

    def copy_once(backend):
        os.environ["XPU_STATE_COPY_BACKEND"] = backend
        arena = torch.randint(0, 256, (1 << 16,), dtype=torch.uint8)
        expected = arena.clone()
        expected[40001:60001] = arena[3:20003]
        try:
            xsc.batch_memcpy(xsc.pointer_table([arena[3:]]), xsc.pointer_table([arena[40001:]]),
                             torch.tensor([20000]))
        except Exception as error:
            return {"backend": backend, "ok": False, "error": type(error).__name__ + ": " + str(error)}
        return {"backend": backend, "ok": torch.equal(arena, expected)}

    for backend in sys.argv[1:]:
        print("XSC-RESULT " + json.dumps(copy_once(backend)), flush=True)
""")


def run_child(code, args, env, cwd, timeout=300):
    """Run `code` in a fresh interpreter with os.environ updated by `env` (None removes a variable);
    returns (results reported on MARK lines, the whole output)."""
    full_env = dict(os.environ)
    full_env.pop("XPU_STATE_COPY_BACKEND", None)
    for key, value in env.items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = str(value)
    proc = subprocess.run([sys.executable, "-c", code, *args], env=full_env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"child exited with {proc.returncode}:\n{output[-4000:]}"
    results = [json.loads(line[len(MARK):]) for line in proc.stdout.splitlines() if line.startswith(MARK)]
    return results, output


def copies(env, cwd, backends=("sycl", "cpu", "sycl")):
    results, output = run_child(CHILD, backends, env, cwd)
    assert [r["backend"] for r in results] == list(backends), output[-4000:]
    return results


# ------------------------------------------------------------------------------------ the SYCL kernel cache

def _cache_file(tmp_path):
    path = tmp_path / "not-a-directory"
    path.write_bytes(b"a file where the cache directory should be\n")
    return path, path


def _below_a_file(tmp_path):
    blocker, _ = _cache_file(tmp_path)
    return blocker / "cache", blocker  # nobody, root included, can create a directory below a file


def _read_only_dir(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories; the two other unwritable cases cover it")
    path = tmp_path / "read-only"
    path.mkdir()
    path.chmod(0o555)
    return path, path


@needs_sycl
@pytest.mark.parametrize("make_cache", [_cache_file, _below_a_file, _read_only_dir],
                         ids=["file", "below-a-file", "read-only-dir"])
def test_unwritable_cache_dir_still_copies(tmp_path, make_cache):
    """The SYCL runtime skips a persistent cache it cannot write and compiles in memory: the copy works
    (just without reuse across processes), and the cache location is left as it was."""
    cache_dir, watched = make_cache(tmp_path)
    before = watched.read_bytes() if watched.is_file() else sorted(watched.iterdir())
    results = copies({"SYCL_CACHE_PERSISTENT": 1, "SYCL_CACHE_DIR": cache_dir}, tmp_path)
    assert all(r["ok"] for r in results), results
    assert (watched.read_bytes() if watched.is_file() else sorted(watched.iterdir())) == before


@needs_sycl
def test_corrupt_cache_entries(tmp_path):
    """Every file of a populated cache replaced by seeded garbage (at most 4 KiB each). The SYCL runtime's
    cache reader may then fail on a garbage length (std::bad_alloc, length_error) in every build of this
    process and the next, since it keeps the entry it cannot read; the provider builds once more with
    options the cache keys apart and says once per build to delete SYCL_CACHE_DIR. Every copy works, the
    native one included."""
    cache = tmp_path / "cache"
    env = {"SYCL_CACHE_PERSISTENT": 1, "SYCL_CACHE_DIR": cache}
    assert all(r["ok"] for r in copies(env, tmp_path, ("sycl",)))
    entries = sorted(p for p in cache.rglob("*") if p.is_file())
    assert entries, "the first run left nothing in SYCL_CACHE_DIR: the corruption below would test nothing"
    rng = random.Random(0)
    for path in entries:
        path.write_bytes(bytes(rng.randrange(256) for _ in range(min(path.stat().st_size, 4096) or 16)))
    for _ in range(2):  # a second process finds the entry the first could not read
        results = copies(env, tmp_path)
        assert all(r["ok"] for r in results), results


# ------------------------------------------------------------------------------- the OpenCL CPU runtime

@needs_sycl
def test_missing_opencl_runtime_names_the_fix(tmp_path):
    """Without the Intel OpenCL CPU runtime there is no SYCL CPU device: each SYCL call says what to
    install and set (a second call says it again rather than crashing); the native path still copies."""
    missing = tmp_path / "nowhere" / "libintelocl.so"
    results = copies({"OCL_ICD_FILENAMES": missing}, tmp_path)
    first_sycl, native, second_sycl = results
    for r in (first_sycl, second_sycl):
        assert not r["ok"]
        assert r["error"].startswith("RuntimeError: no SYCL CPU device"), r["error"]
        assert "OCL_ICD_FILENAMES" in r["error"] and "intel-opencl-rt" in r["error"], r["error"]
    assert native["ok"], native


# ---------------------------------------------------------------------------------- the run-time compile

@needs_sycl
@pytest.mark.skipif(SYCL_ORIGIN != "sycl-jit", reason="only the sycl-jit backend compiles at run time")
def test_kernel_compile_failure_reports_the_build_log(tmp_path):
    """An option the OpenCL CPU compiler rejects (the SYCL runtime appends it to every program build)
    makes the run-time build fail: the error carries the build log, which names the offending option;
    a later call fails the same way instead of using a half-built kernel; the native path still copies."""
    env = {"SYCL_PROGRAM_APPEND_COMPILE_OPTIONS": "-cl-no-such-option",
           "SYCL_CACHE_PERSISTENT": 1, "SYCL_CACHE_DIR": tmp_path / "cache"}
    first_sycl, native, second_sycl = copies(env, tmp_path)
    for r in (first_sycl, second_sycl):
        assert not r["ok"]
        assert "compiling the SYCL copy kernels at run time failed" in r["error"], r["error"]
        assert "-cl-no-such-option" in r["error"], r["error"]
    assert native["ok"], native


# ---------------------------------------------------------------------------------------- concurrency

# 8 threads released together into their first SYCL call: 4 batch_memcpy, 4 copy_states_ (both kernels
# come from one build). Each checks its own result.
FIRST_CALLS = textwrap.dedent("""
    import json, os, threading
    import torch
    import xpu_state_copy as xsc

    os.environ["XPU_STATE_COPY_BACKEND"] = "sycl"
    THREADS = 8
    start = threading.Barrier(THREADS)
    results = [None] * THREADS

    def memcpy_job(i):
        arena = torch.randint(0, 256, (8192,), dtype=torch.uint8)
        expected = arena.clone()
        expected[4100 + i:4100 + i + 3000] = arena[i:i + 3000]
        src, dst = xsc.pointer_table([arena[i:]]), xsc.pointer_table([arena[4100 + i:]])
        start.wait()
        xsc.batch_memcpy(src, dst, torch.tensor([3000]))
        return torch.equal(arena, expected)

    def states_job(i):
        pool = torch.randn(4, 3, 16 + i)
        expected = pool.clone()
        expected[2, :2] = pool[1, 1:]
        start.wait()
        xsc.copy_states_([pool], ["conv_sd"], torch.tensor([1]), torch.tensor([2]), torch.tensor([1]))
        return torch.equal(pool, expected)

    def run(i):
        try:
            results[i] = (memcpy_job if i % 2 else states_job)(i)
        except Exception as error:
            results[i] = type(error).__name__ + ": " + str(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("XSC-RESULT " + json.dumps(results), flush=True)
""")

# The SYCL runtime's call trace; each build of the kernels creates exactly one program from SPIR-V (or
# from a cached binary), so counting these calls counts builds without any hook in the extension.
PROGRAM_CREATES = ("urProgramCreateWithIL(", "urProgramCreateWithBinary(")


@needs_sycl
def test_concurrent_first_calls_build_once_and_copy_correctly(tmp_path):
    env = {"SYCL_CACHE_PERSISTENT": 1, "SYCL_CACHE_DIR": tmp_path / "cache", "SYCL_UR_TRACE": 2}
    results, output = run_child(FIRST_CALLS, [], env, tmp_path)
    assert results == [[True] * 8], output[-4000:]
    builds = sum(output.count(call) for call in PROGRAM_CREATES)
    if builds == 0:
        pytest.skip("this SYCL runtime does not trace its calls with SYCL_UR_TRACE=2; build count unobservable")
    assert builds == 1, f"the kernels were built {builds} times for one device"


def test_threads_on_separate_tensors_do_not_interfere(target):
    """8 threads, each copying its own random batches over and over on the same target at once."""
    threads, rounds, errors = 8, 12, []

    def worker(seed):
        rng = random.Random(seed)
        try:
            for _ in range(rounds):
                sizes = [rng.choice([0, 1, 17, 300, 4099, 70000]) for _ in range(rng.randrange(1, 24))]
                batch = random_batch(rng, target.device, sizes, overlap_every=3)
                expected = batch.expected()
                xpu_state_copy.batch_memcpy(*batch.tables())
                synchronize(target.device)
                assert_matches(batch, expected)
        except Exception as error:  # an AssertionError included: reported by the main thread below
            errors.append(f"thread {seed}: {type(error).__name__}: {error}")

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
