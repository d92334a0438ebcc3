"""Pack and unpack stream payloads with the same ``amaranth.lib.data`` layouts the RTL uses,
so testbenches never retype a bit position."""
import enum

from amaranth.hdl import Shape

__all__ = ["pack", "unpack", "field_slices"]


def field_slices(layout):
    """``{name: (offset, width)}`` of a struct layout's fields."""
    return {name: (field.offset, field.width) for name, field in layout}


def pack(layout, **fields):
    """The integer of a payload; missing fields are zero, enum members give their value."""
    slices = field_slices(layout)
    unknown = set(fields) - set(slices)
    if unknown:
        raise KeyError(f"no field {', '.join(sorted(unknown))} in layout {layout!r}")
    value = 0
    for name, v in fields.items():
        offset, width = slices[name]
        if isinstance(v, enum.Enum):
            v = v.value
        v = int(v)
        if not 0 <= v < (1 << width):
            raise ValueError(f"field {name} = {v:#x} does not fit in {width} bits")
        value |= v << offset
    return value


def unpack(layout, value):
    """``{name: int or enum member}`` of a payload integer."""
    value = int(value)
    out = {}
    for name, field in layout:
        raw = (value >> field.offset) & ((1 << field.width) - 1)
        shape = field.shape
        if isinstance(shape, type) and issubclass(shape, enum.Enum):
            try:
                raw = shape(raw)
            except ValueError:
                pass
        out[name] = raw
    return out
