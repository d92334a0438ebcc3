"""Reset-scrub checks: find internal signals that still hold words of a secret."""
from cocotb.handle import HierarchyObject

__all__ = ["signals", "holders"]


def signals(handle):
    """Every signal below *handle* (Verilator exposes them all with --public-flat-rw)."""
    for child in handle:
        if isinstance(child, HierarchyObject):
            yield from signals(child)
        else:
            yield child


def holders(dut, secrets, skip_prefixes=()):
    """Paths of the (>= 32-bit) signals whose value contains a 32-bit word of any of the
    byte strings *secrets*, at a byte boundary. Ports the testbench drives are left out by
    *skip_prefixes* (e.g. ``("i__",)``)."""
    words = {s[i:i + 4] for s in secrets for i in range(0, len(s) - 3, 4)}
    found = []
    for sig in signals(dut):
        if skip_prefixes and sig._name.startswith(tuple(skip_prefixes)):
            continue
        try:
            value = sig.value
            width, raw = len(value), int(value)
        except (TypeError, ValueError, AttributeError):
            continue
        if width >= 32 and any(w in raw.to_bytes((width + 7) // 8, "little") for w in words):
            found.append(sig._path)
    return found
