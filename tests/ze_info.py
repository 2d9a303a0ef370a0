"""What IGC decided for each kernel, read from the binary ocloc writes (a "zebin", an ELF file).

A zebin's `.ze_info` section is YAML written by IGC: per kernel its execution environment (simd_size,
grf_count, spill_size, slm_size, ...) and the per-thread memory buffers the driver must allocate (scratch
for spills and private arrays). Only that small, regular subset is parsed here, without a YAML library.

    python tests/ze_info.py BINARY...   prints a markdown table (what docs/device-compile.md shows)
"""
import dataclasses
import re
import struct
import sys

ELF_MAGIC = b"\x7fELF"


@dataclasses.dataclass
class KernelInfo:
    name: str
    env: dict  # execution_env: key -> int or str
    buffers: list  # per_thread_memory_buffers: dicts with type, usage, size

    @property
    def simd(self):
        return self.env.get("simd_size")

    @property
    def spill(self):
        return self.env.get("spill_size", 0)

    @property
    def scratch(self):
        """Bytes per thread the driver allocates for spills and private arrays."""
        return sum(b.get("size", 0) for b in self.buffers)


def section(binary: bytes, wanted: str) -> bytes:
    """The bytes of the section named `wanted` of a 64-bit little-endian ELF file."""
    if binary[:4] != ELF_MAGIC or binary[4] != 2:
        raise ValueError("not a 64-bit ELF file (ocloc writes zebin for the targets tested here)")
    (shoff,) = struct.unpack_from("<Q", binary, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", binary, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", binary, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    for name_offset, _type, _flags, _addr, offset, size, *_ in headers:
        start = names_at + name_offset
        if binary[start:binary.index(b"\0", start)].decode() == wanted:
            return binary[offset:offset + size]
    raise ValueError(f"no {wanted} section (IGC's per-kernel report); is this a zebin?")


def _value(text):
    text = text.strip().strip("'\"")
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def kernels(binary: bytes) -> dict:
    """{kernel name: KernelInfo} from a zebin's .ze_info."""
    found, kernel, block, top = {}, None, None, None
    for line in section(binary, ".ze_info").decode().splitlines():
        if m := re.fullmatch(r"(\w+):.*", line):  # kernels:, functions:, kernels_misc_info: ...
            top, kernel = m.group(1), None
        elif top == "kernels" and (m := re.fullmatch(r"  - name:\s+(\S+)", line)):
            kernel = found[m.group(1)] = KernelInfo(m.group(1), {}, [])
            block = None
        elif kernel is None:
            continue
        elif m := re.fullmatch(r"    (\w+):\s*(.*)", line):
            block = m.group(1)
            if m.group(2):
                block = None  # a scalar of the kernel itself
        elif block == "execution_env" and (m := re.fullmatch(r"      (\w+):\s+(.+)", line)):
            kernel.env[m.group(1)] = _value(m.group(2))
        elif block == "per_thread_memory_buffers" and (m := re.fullmatch(r"      (- |  )(\w+):\s+(.+)", line)):
            if m.group(1) == "- ":
                kernel.buffers.append({})
            kernel.buffers[-1][m.group(2)] = _value(m.group(3))
    if not found:
        raise ValueError(".ze_info names no kernel")
    return found


def short(name):
    return name.replace("__sycl_kernel_", "")


def table(reports: dict) -> str:
    """A markdown table: one row per kernel, per target SIMD / GRF / spill / scratch bytes per thread."""
    targets = list(reports)
    names = sorted({short(n) for r in reports.values() for n in r if n.startswith("__sycl_kernel_")},
                   key=lambda n: (len(n.split("_")), n))
    rows = ["| kernel | " + " | ".join(f"{t}: SIMD, GRF, spill, scratch" for t in targets) + " |",
            "|---" * (len(targets) + 1) + "|"]
    for name in names:
        cells = []
        for t in targets:
            k = reports[t].get("__sycl_kernel_" + name)
            cells.append("-" if k is None else f"{k.simd}, {k.env.get('grf_count')}, {k.spill}, {k.scratch}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table({path.rsplit("/", 1)[-1]: kernels(open(path, "rb").read()) for path in sys.argv[1:]}))
