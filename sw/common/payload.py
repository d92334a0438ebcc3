"""Pack and unpack integers with the same ``amaranth.lib.data`` layouts the RTL uses, so
models, drivers and testbenches never retype a bit position (the one codec of sw/ and tb/).

A payload is a dict of its layout's fields (ints for an :class:`~amaranth.lib.data.ArrayLayout`).
:func:`pack` takes for a field an int, a bool or an enum member; for a field that is itself a
layout, its int or the dict (or, for an array, the list) of its own fields. Every value is
range-checked: one that does not fit its field raises ValueError naming the field and its
width. :func:`unpack` gives every field as an int, the member of an enum-shaped field as the
member (unless ``enums=False``) and, with ``nested=True``, a nested layout as a dict again.
"""
import enum
from collections.abc import Mapping

from amaranth.lib import data

__all__ = ["pack", "unpack", "field_slices"]

_CACHE = {}
_CACHE_LIMIT = 1024     # layouts built per call (beat_layout(lanes), ...) must not pile up


class _Field:
    __slots__ = ("name", "offset", "width", "mask", "enum", "layout")

    def __init__(self, name, field):
        self.name, self.offset, self.width = name, field.offset, field.width
        self.mask = (1 << field.width) - 1
        shape = field.shape
        self.enum = shape if isinstance(shape, type) and issubclass(shape, enum.Enum) else None
        self.layout = shape if isinstance(shape, data.Layout) else None


def _fields(layout):
    """``{name: _Field}`` of *layout*, computed once per layout object: iterating an Amaranth
    layout costs microseconds per field, more than packing a whole payload."""
    entry = _CACHE.get(id(layout))
    if entry is None or entry[0] is not layout:
        if not isinstance(layout, data.Layout):
            raise TypeError(f"{layout!r} is not an amaranth.lib.data layout")
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        # the entry holds the layout, so its id is not reused while the entry lives
        entry = _CACHE[id(layout)] = (layout, {name: _Field(name, f) for name, f in layout})
    return entry[1]


def field_slices(layout):
    """``{name: (offset, width)}`` of a layout's fields."""
    return {name: (f.offset, f.width) for name, f in _fields(layout).items()}


def _path(prefix, name):
    if isinstance(name, int):
        return f"{prefix}[{name}]"
    return f"{prefix}.{name}" if prefix else name


def _encode(layout, values, prefix):
    fields = _fields(layout)
    if isinstance(values, dict) or isinstance(values, Mapping):     # (dict first: ABC checks are slow)
        unknown = [str(name) for name in values if name not in fields]
        if unknown:
            where = f" of {prefix}" if prefix else ""
            raise KeyError(f"no field {', '.join(sorted(unknown))}{where} in layout {layout!r}")
        items = values.items()
    elif isinstance(values, (list, tuple)) and isinstance(layout, data.ArrayLayout):
        if len(values) != layout.length:
            raise ValueError(f"{len(values)} elements for {prefix or 'an array'} of {layout.length}")
        items = enumerate(values)
    else:
        raise TypeError(f"{prefix or 'payload'}: {values!r} is not the fields of {layout!r}")
    value = 0
    for name, v in items:
        f = fields[name]
        if type(v) is not int:
            if f.layout is not None and isinstance(v, (dict, list, tuple, Mapping)):
                v = _encode(f.layout, v, _path(prefix, name))
            elif isinstance(v, enum.Enum):
                v = v.value
            v = int(v)
        if not 0 <= v <= f.mask:
            raise ValueError(f"field {_path(prefix, name)} = {v:#x} does not fit in {f.width} bits")
        value |= v << f.offset
    return value


def pack(layout, values=None, /, **fields):
    """The integer of a payload of *layout*: its fields by keyword, or *values* (a dict, or a
    list for an array layout); missing fields are zero. KeyError for a field the layout does
    not have, ValueError for a value that does not fit its field."""
    if values is None:
        return _encode(layout, fields, "")
    if fields:
        raise TypeError("pack() takes the fields either as a dict/list or as keywords, not both")
    return _encode(layout, values, "")


def unpack(layout, value, *, enums=True, nested=False):
    """``{name: int}`` of a payload integer of *layout*. With *enums*, an enum-shaped field
    whose value is a member gives the member; with *nested*, a field that is a layout gives
    its own dict instead of its int."""
    value = int(value)
    out = {}
    for name, f in _fields(layout).items():
        raw = (value >> f.offset) & f.mask
        if nested and f.layout is not None:
            raw = unpack(f.layout, raw, enums=enums, nested=True)
        elif enums and f.enum is not None:
            try:
                raw = f.enum(raw)
            except ValueError:
                pass
        out[name] = raw
    return out
