"""Timing: device events on GPUs, a host timer on the CPU.

Each repetition is timed on its own so the spread (p10/p90) is visible, and
repetitions cycle through the rotation sets so no set is still in cache from
the previous call. The methods of one workload take turns, a chunk of
repetitions each, so that a device running faster or slower for a while
moves all of them alike.
"""
import statistics
import time

import torch

CHUNK = 10  # repetitions queued behind one pre-fill sleep on CUDA


class Clock:
    def __init__(self, device, extra_sync=None):
        self.device = torch.device(device)
        self.gpu = self.device.type in ("cuda", "xpu")
        self.module = getattr(torch, self.device.type) if self.gpu else None
        self.extra_sync = extra_sync  # e.g. a SYCL queue behind CPU tensors

    def sync(self):
        if self.gpu:
            self.module.synchronize(self.device)
        if self.extra_sync is not None:
            self.extra_sync()

    def _prefill(self):
        # Queue ~2 ms of GPU sleep first so the host can enqueue the next calls
        # before the GPU gets to them: event times then show device work, not
        # gaps where the GPU waited for Python.  Methods whose host cost per call
        # exceeds their GPU time still show gaps: that cost is real.
        if self.device.type == "cuda" and hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(4_000_000)

    def time_in_turns(self, methods, reps, warmup):
        """Seconds per call of each method (a list of calls per method), one value
        per repetition. The methods take turns, CHUNK repetitions each: on an H200
        the first method timed right after a 2.4 GiB workload ran 12 % slow
        while the later ones did not, so timing one method after another
        compared the device's states, not the methods."""
        for calls in methods:
            for i in range(warmup):
                calls[i % len(calls)]()
        self.sync()
        samples = [[] for _ in methods]
        for first in range(0, reps, CHUNK):
            for calls, out in zip(methods, samples):
                out += self._time_chunk(calls, range(first, min(reps, first + CHUNK)))
        return samples

    def _time_chunk(self, calls, indices):
        n = len(calls)
        if not self.gpu:
            samples = []
            for i in indices:
                t0 = time.perf_counter()
                calls[i % n]()
                self.sync()
                samples.append(time.perf_counter() - t0)
            return samples
        Event = self.module.Event
        self._prefill()
        marks = []
        for i in indices:
            start, end = Event(enable_timing=True), Event(enable_timing=True)
            start.record()
            calls[i % n]()
            end.record()
            marks.append((start, end))
        self.sync()
        return [s.elapsed_time(e) / 1e3 for s, e in marks]

    def host_cost(self, call, calls=200, chunk=20):
        """Host time of one call without waiting for the device: what the caller's
        thread spends per call.  Synchronized only between chunks, outside the
        timer, so the device queue never fills up."""
        call()
        samples = []
        for _ in range(max(1, calls // chunk)):
            self.sync()
            for _ in range(chunk):
                t0 = time.perf_counter()
                call()
                samples.append(time.perf_counter() - t0)
        self.sync()
        return summarize(samples)


def summarize(samples):
    ordered = sorted(samples)

    def pct(p):
        return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]
    return {"median_s": statistics.median(ordered), "p10_s": pct(0.10),
            "p90_s": pct(0.90), "samples": len(ordered)}
