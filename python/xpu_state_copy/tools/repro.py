"""Reproduce vLLM's "Overflow when unpacking long long" on any machine, then show our path working.

vLLM 0.23-0.28 did ``table[i] = state.data_ptr()`` with ``table`` a torch.int64 tensor. An XPU (Level Zero)
address has bit 63 set, so that Python int is >= 2**63 and the store raises. Without an XPU the address
is that of the report, 0xffffd556b6400000. Our path stores the same 64 bits (as the int64 with those bits,
or computed in C++ by write_pointers_) and copies state blocks through tables of real addresses.
"""
import json

import torch

REPORTED_ADDRESS = 0xFFFFD556B6400000  # a Level Zero device pointer, from the original report


def add_arguments(parser):
    parser.add_argument("--device", default=None, help="where to allocate (default: xpu if available, else cpu)")
    parser.add_argument("--json", action="store_true", help="print the steps as JSON")


def _pick_device(name):
    if name:
        return torch.device(name)
    return torch.device("xpu") if hasattr(torch, "xpu") and torch.xpu.is_available() else torch.device("cpu")


def store_like_vllm(address):
    """What vLLM did; returns the error text it raises (None if it did not raise)."""
    table = torch.zeros(1, dtype=torch.int64)
    try:
        table[0] = address
    except (ValueError, OverflowError, RuntimeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def store_our_way(address):
    """The same address through the int64 with the same bits; returns the address read back."""
    from .. import as_signed, as_unsigned

    table = torch.zeros(1, dtype=torch.int64)
    table[0] = as_signed(address)
    return as_unsigned(int(table[0]))


def copy_our_way(device):
    """Blocks of a state tensor copied through pointer tables built from it (the addresses never pass
    through a Python int); returns the source and destination addresses and whether the bytes match."""
    from .. import as_unsigned, batch_memcpy, pointer_table, write_pointers_

    state = torch.randn(4, 2, 64, device=device)
    expected = state.clone()
    expected[2], expected[3] = state[0], state[1]
    sources = pointer_table([state[0], state[1]])
    destinations = torch.zeros(2, dtype=torch.int64, device=device)
    write_pointers_(destinations, [state[2], state[3]])  # the fix for vLLM's int64 tables
    sizes = torch.full((2,), state[0].numel() * state.element_size(), dtype=torch.int32, device=device)
    batch_memcpy(sources, destinations, sizes)
    written = [as_unsigned(int(v)) for v in destinations.cpu()]
    return {"source_addresses": [hex(as_unsigned(int(v))) for v in sources.view(torch.int64).cpu()],
            "destination_addresses": [hex(a) for a in written],
            "destinations_exact": written == [state[2].data_ptr(), state[3].data_ptr()],
            "bytes_match": bool(torch.equal(state.cpu(), expected.cpu()))}


def reproduce(device):
    probe = torch.empty(1, device=device)
    live = probe.data_ptr()
    address = live if live >= 1 << 63 else REPORTED_ADDRESS
    steps = {"device": str(device), "live_address": hex(live), "live_address_has_bit_63": live >= 1 << 63,
             "address_used": hex(address),
             "address_source": "live allocation" if address == live else "the report (no high address here)",
             "vllm_store_error": store_like_vllm(address)}
    steps["our_store_reads_back"] = hex(store_our_way(address))
    steps["our_store_exact"] = store_our_way(address) == address
    steps["copy"] = copy_our_way(device)
    steps["reproduced"] = steps["vllm_store_error"] is not None and "Overflow" in steps["vllm_store_error"]
    steps["fixed"] = steps["our_store_exact"] and steps["copy"]["destinations_exact"] and steps["copy"]["bytes_match"]
    return steps


def run(args) -> int:
    steps = reproduce(_pick_device(args.device))
    if args.json:
        print(json.dumps(steps, indent=2))
    else:
        copy = steps["copy"]
        print(f"device {steps['device']}: a live allocation is at {steps['live_address']} "
              f"(bit 63 set: {steps['live_address_has_bit_63']}); using {steps['address_used']} "
              f"from {steps['address_source']}")
        print(f"vLLM's way   int64_table[0] = address   -> {steps['vllm_store_error'] or 'no error'}")
        print(f"our way      int64_table[0] = as_signed(address) -> reads back {steps['our_store_reads_back']} "
              f"({'same bits' if steps['our_store_exact'] else 'DIFFERENT bits'})")
        print(f"our copy     {copy['source_addresses']} -> {copy['destination_addresses']}: "
              f"addresses {'exact' if copy['destinations_exact'] else 'WRONG'}, "
              f"bytes {'match' if copy['bytes_match'] else 'DIFFER'}")
        print("reproduced the crash and the fix works" if steps["reproduced"] and steps["fixed"] else
              f"reproduced: {steps['reproduced']}, fixed: {steps['fixed']}")
    return 0 if steps["fixed"] else 1
