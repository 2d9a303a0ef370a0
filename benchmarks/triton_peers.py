"""The two Triton copy designs vLLM uses, written here from their description.

1. One program per entry, copying the entry byte by byte, 1024 bytes per step.
2. 16 programs ("tiles") per entry, each copying every 16th 8-byte-word chunk.

Both read uint64 address tables on the device and cast the addresses to
pointers.  The kernels are built on first use, not at import, because Triton
chooses between compiling and interpreting (TRITON_INTERPRET=1, used for CPU
tests) when a kernel is defined.
"""
import functools
import os

BYTEWISE_BLOCK = 1024  # bytes per step of the one-program-per-entry kernel
TILES = 16             # programs per entry of the tiled kernel
WORD_BLOCK = 1024      # 8-byte words per step of one tile


def triton_version():
    try:
        import triton
    except Exception:  # noqa: BLE001 - any import failure means "no Triton"
        return None
    return triton.__version__


def usable_on(device_type):
    """Compiled Triton needs a GPU; on the CPU only the interpreter works, and it
    is far too slow to time, so it is used only when asked for explicitly."""
    if triton_version() is None:
        return False
    if device_type in ("cuda", "xpu"):
        return True
    return _interpreting()


def _interpreting():
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _kernels(interpret):
    """Kernels built once per mode (``interpret`` is only the cache key: Triton
    itself reads TRITON_INTERPRET when ``triton.jit`` runs)."""
    import triton
    import triton.language as tl

    @triton.jit
    def bytewise(src_ptrs, dst_ptrs, sizes, BLOCK: tl.constexpr):
        entry = tl.program_id(0)
        src = tl.load(src_ptrs + entry).to(tl.pointer_type(tl.uint8))
        dst = tl.load(dst_ptrs + entry).to(tl.pointer_type(tl.uint8))
        size = tl.load(sizes + entry)
        for start in range(0, size, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < size
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    @triton.jit
    def tiled_words(src_ptrs, dst_ptrs, sizes, TILES: tl.constexpr, BLOCK: tl.constexpr):
        entry = tl.program_id(0)
        tile = tl.program_id(1)
        src_addr = tl.load(src_ptrs + entry)
        dst_addr = tl.load(dst_ptrs + entry)
        size = tl.load(sizes + entry)
        words = size // 8
        # Word access assumes 8-byte aligned blocks, true for state pools;
        # verification before timing would catch a layout where it is not.
        src = src_addr.to(tl.pointer_type(tl.uint64))
        dst = dst_addr.to(tl.pointer_type(tl.uint64))
        for start in range(tile * BLOCK, words, TILES * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < words
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
        if tile == 0:  # the size % 8 trailing bytes, if any
            offs = words * 8 + tl.arange(0, 8)
            mask = offs < size
            src_b = src_addr.to(tl.pointer_type(tl.uint8))
            dst_b = dst_addr.to(tl.pointer_type(tl.uint8))
            tl.store(dst_b + offs, tl.load(src_b + offs, mask=mask), mask=mask)

    return bytewise, tiled_words


def bytewise_call(src_table, dst_table, sizes):
    kernel = _kernels(_interpreting())[0]
    grid = (src_table.numel(),)
    return lambda: kernel[grid](src_table, dst_table, sizes, BLOCK=BYTEWISE_BLOCK)


def tiled_call(src_table, dst_table, sizes):
    kernel = _kernels(_interpreting())[1]
    grid = (src_table.numel(), TILES)
    return lambda: kernel[grid](src_table, dst_table, sizes, TILES=TILES, BLOCK=WORD_BLOCK)
