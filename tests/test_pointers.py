"""Addresses stay bit-exact, including those >= 2**63 that XPU device pointers have."""
import pytest
import torch

import xpu_state_copy
from xpu_state_copy import as_signed, as_unsigned

XPU_LIKE_ADDRESS = 0xFFFFD556B6400000  # bit 63 set, as Level Zero device pointers have
TORCH_FIXED_UINT64_SETITEM = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14)


def test_pointer_table_is_uint64_data_ptrs(target):
    tensors = [torch.empty(n, device=target.device) for n in (1, 7, 1000)] + [torch.empty(8)[3:].to(target.device)]
    table = xpu_state_copy.pointer_table(tensors)
    assert table.dtype == torch.uint64 and table.device == tensors[0].device and table.shape == (len(tensors),)
    got = [as_unsigned(v) for v in table.cpu().view(torch.int64).tolist()]
    assert got == [t.data_ptr() for t in tensors]


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint64])
def test_write_pointers_writes_exact_bits_at_start(target, dtype):
    tensors = [torch.empty(5, device=target.device), torch.empty(9, device=target.device)]
    poison = -0x5A5A5A5A5A5A5A5B
    table = torch.full((6,), poison, dtype=torch.int64).view(dtype).to(target.device)
    assert xpu_state_copy.write_pointers_(table, tensors, start=3) is table
    got = table.cpu().view(torch.int64).tolist()
    assert got[:3] == [poison] * 3 and got[5] == poison
    assert [as_unsigned(v) for v in got[3:5]] == [t.data_ptr() for t in tensors]


def test_write_pointers_rejects_out_of_range_start():
    table = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"start = 1 with 2 tensors needs 3 entries but table has 2"):
        xpu_state_copy.write_pointers_(table, [torch.empty(1), torch.empty(1)], start=1)
    with pytest.raises(RuntimeError, match=r"start = -1 is negative"):
        xpu_state_copy.write_pointers_(table, [torch.empty(1)], start=-1)
    with pytest.raises(RuntimeError, match=r"table must be torch.uint64 or torch.int64, got Float"):
        xpu_state_copy.write_pointers_(torch.zeros(2), [torch.empty(1)])
    assert table.tolist() == [0, 0]


@pytest.mark.parametrize("address", [0, 1, 2**47 - 1, 2**63 - 1, 2**63, XPU_LIKE_ADDRESS, 2**64 - 1])
def test_signed_unsigned_round_trip(address):
    value = as_signed(address)
    assert -(2**63) <= value < 2**63
    assert as_unsigned(value) == address
    # The int64 carrier holds the same bits as a uint64 tensor built from the address.
    carrier = torch.tensor([value], dtype=torch.int64)
    assert as_unsigned(carrier.item()) == address
    if address < 2**63:
        assert value == address


def test_xpu_like_address_bits():
    assert as_signed(XPU_LIKE_ADDRESS) == XPU_LIKE_ADDRESS - 2**64
    table = torch.zeros(4, dtype=torch.int64)
    table[2] = as_signed(XPU_LIKE_ADDRESS)  # what vLLM's table write should be
    assert table.view(torch.uint64)[2:3].view(torch.int64).item() == as_signed(XPU_LIKE_ADDRESS)
    assert bytes(table[2:3].numpy().tobytes()) == XPU_LIKE_ADDRESS.to_bytes(8, "little")


@pytest.mark.parametrize("bad", [-1, 2**64, 2**70])
def test_as_signed_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match="address"):
        as_signed(bad)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1])
def test_as_unsigned_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match="outside the int64 range"):
        as_unsigned(bad)


def test_int64_table_store_of_xpu_address_overflows_like_the_report():
    """The crash of the report: an address >= 2**63 stored into an int64 table the way vLLM did."""
    table = torch.zeros(2, dtype=torch.int64)
    with pytest.raises((ValueError, RuntimeError), match="Overflow when unpacking long long|out of range"):
        table[0] = XPU_LIKE_ADDRESS


@pytest.mark.skipif(TORCH_FIXED_UINT64_SETITEM, reason="torch >= 2.14 accepts uint64 item assignment")
def test_uint64_setitem_still_overflows_on_this_torch():
    """torch < 2.14 (what vLLM 0.22.1 - 0.30 pin for XPU): even a uint64 table rejects `t[i] = 2**63 + 5`, with
    the very ValueError of the report; only whole-tensor construction and our C++ paths keep those bits."""
    table = torch.zeros(2, dtype=torch.uint64)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        table[0] = 2**63 + 5
    built = torch.tensor([2**63 + 5], dtype=torch.uint64)
    assert as_unsigned(built.view(torch.int64).item()) == 2**63 + 5


@pytest.mark.skipif(not TORCH_FIXED_UINT64_SETITEM, reason="torch < 2.14 rejects uint64 item assignment")
def test_uint64_setitem_works_on_newer_torch():
    table = torch.zeros(2, dtype=torch.uint64)
    table[0] = 2**63 + 5
    assert as_unsigned(table.view(torch.int64)[0].item()) == 2**63 + 5


def test_tensors_on_mixed_devices_are_rejected():
    """A meta tensor in the list sends dispatch to the fake implementation; the check must still fire."""
    with pytest.raises(RuntimeError, match=r"tensors\[1\] is on meta but tensors\[0\] is on cpu"):
        xpu_state_copy.pointer_table([torch.empty(2), torch.empty(2, device="meta")])
    table = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"tensors\[1\] is on meta but tensors\[0\] is on cpu"):
        xpu_state_copy.write_pointers_(table, [torch.empty(2), torch.empty(2, device="meta")])
    assert table.tolist() == [0, 0]
