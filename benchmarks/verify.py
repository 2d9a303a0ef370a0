"""Check a method's result before it is timed.

The pools are filled with random bytes, so every destination block starts out
different from its source ("poisoned").  A method then runs once over every
rotation set and the whole pool, not only the destinations, must equal the
expected copy: this catches missing, partial, misplaced and stray writes.
"""
from .peers import random_bytes


class TableCheck:
    def __init__(self, buffers):
        self.buffers = buffers
        for bk in buffers.backing:
            bk.copy_(random_bytes(bk.shape, bk.device))
        self.pristine = [bk.clone() for bk in buffers.backing]
        self.expected = buffers.expected_after_all_sets()

    def poison(self):
        for bk, init in zip(self.buffers.backing, self.pristine):
            bk.copy_(init)

    def check(self):
        problems = []
        for i, (bk, exp) in enumerate(zip(self.buffers.backing, self.expected)):
            bad = bk != exp
            if bool(bad.any()):
                entries = int(bad.flatten(2).any(-1).sum())
                problems.append(f"pool group {i}: {int(bad.sum())} bytes wrong in {entries} blocks")
        return "; ".join(problems) or None


def verify(calls, target, sync):
    """Run every call once on poisoned buffers; return None when right, else a
    short reason.  A method that raises is a failure too."""
    try:
        target.poison()
        sync()
        for call in calls:
            call()
        sync()
        return target.check()
    except Exception as exc:  # noqa: BLE001 - report any failure as FAILED
        return f"{type(exc).__name__}: {exc}".strip()[:300]
