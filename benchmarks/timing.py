"""Timing: device events on GPUs, a host timer on the CPU.

Each repetition is timed on its own so the spread (p10/p90) is visible, and
repetitions cycle through the rotation sets so no set is still in cache from
the previous call.
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

    def time_calls(self, calls, reps, warmup):
        """Seconds per call, one value per repetition."""
        n = len(calls)
        for i in range(warmup):
            calls[i % n]()
        self.sync()
        samples = []
        if self.gpu:
            Event = self.module.Event
            for first in range(0, reps, CHUNK):
                self._prefill()
                marks = []
                for i in range(first, min(reps, first + CHUNK)):
                    start, end = Event(enable_timing=True), Event(enable_timing=True)
                    start.record()
                    calls[i % n]()
                    end.record()
                    marks.append((start, end))
                self.sync()
                samples += [s.elapsed_time(e) / 1e3 for s, e in marks]
        else:
            for i in range(reps):
                t0 = time.perf_counter()
                calls[i % n]()
                self.sync()
                samples.append(time.perf_counter() - t0)
        return samples

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
