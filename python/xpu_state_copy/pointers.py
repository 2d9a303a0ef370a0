"""Two's-complement conversions between addresses and the int64 values that carry them.

An XPU device address has bit 63 set, so as a Python int it is >= 2**63 and does not fit an int64 slot;
the same 64 bits read as a signed integer do. These two functions move between the readings exactly.
"""

_TWO_64 = 1 << 64
_TWO_63 = 1 << 63


def as_signed(address: int) -> int:
    """The int64 value with the same bits as `address`, an unsigned 64-bit integer in [0, 2**64)."""
    address = int(address)
    if not 0 <= address < _TWO_64:
        raise ValueError(f"address {address:#x} is outside [0, 2**64)" if address >= 0
                         else f"address {address} is negative; expected an unsigned 64-bit value")
    return address - _TWO_64 if address >= _TWO_63 else address


def as_unsigned(value: int) -> int:
    """The address (in [0, 2**64)) whose bits `value`, an int64 in [-2**63, 2**63), carries."""
    value = int(value)
    if not -_TWO_63 <= value < _TWO_63:
        raise ValueError(f"value {value} is outside the int64 range [-2**63, 2**63)")
    return value + _TWO_64 if value < 0 else value
