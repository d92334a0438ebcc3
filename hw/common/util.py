"""Named nets and constructor parameter checks."""
from amaranth.hdl import Signal, Value

__all__ = ["wire", "check_int", "check_choice", "lowest_set"]


def wire(m, value, name, shape=None):
    """A comb signal named *name* driven by *value*.

    Amaranth lowers expressions as trees: a value read in several places would be copied
    (and walked again) at every use, and would not show up in the waves. A named net is
    built once."""
    value = Value.cast(value)
    signal = Signal(shape if shape is not None else len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def check_int(name, value, minimum=None, maximum=None):
    """*value* if it is an int (not a bool) within [minimum, maximum]; TypeError / ValueError
    naming the parameter otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be in {minimum}..{maximum}, not {value}")
    return value


def check_choice(name, value, choices):
    """*value* if it is an int (not a bool) in *choices*; TypeError / ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, not {value}")
    return value


def lowest_set(m, bits, name):
    """``(any, index)`` of the lowest set bit of *bits*, as named nets (a priority encoder)."""
    bits = Value.cast(bits)
    index = Signal(range(max(2, len(bits))), name=f"{name}_index")
    for k in reversed(range(len(bits))):
        with m.If(bits[k]):
            m.d.comb += index.eq(k)
    return wire(m, bits.any(), f"{name}_any"), index

