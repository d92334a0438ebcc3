"""Pack and unpack integers with the same ``amaranth.lib.data`` layouts the RTL uses, so
models, drivers and testbenches never retype a bit position (the one codec of sw/ and tb/).

A payload is a dict of its layout's fields (ints for an :class:`~amaranth.lib.data.ArrayLayout`).
:func:`pack` takes for a field an int, a bool or an enum member; for a field that is itself a
layout, its int or the dict (or, for an array, the list) of its own fields. Every value is
range-checked: one that does not fit its field raises ValueError naming the field and its
width. :func:`unpack` gives every field as an int, the member of an enum-shaped field as the
member (unless ``enums=False``) and, with ``nested=True``, a nested layout as a dict again.

Errors: every malformed input raises a :class:`PayloadError` (a ValueError) and nothing else
— :class:`PayloadTypeError` (also a TypeError) for a value that is not an integer at all (a
float, a string: integers are taken through ``__index__``, so bools, enum members and
cocotb ``LogicArray`` values pass and ``2.7`` or ``'5'`` do not), :class:`UnknownFieldError`
(also a KeyError) for a field name the layout does not have, plain :class:`PayloadError`
for a value out of its field's range or a list of the wrong length.
"""
import enum
import operator
from collections.abc import Mapping

from amaranth.lib import data

__all__ = ["pack", "unpack", "field_slices", "PayloadError", "PayloadTypeError", "UnknownFieldError"]

_CACHE = {}
_CACHE_LIMIT = 1024     # layouts built per call (beat_layout(lanes), ...) must not pile up


class PayloadError(ValueError):
    """A payload, field value or payload integer that does not fit its layout."""


class PayloadTypeError(PayloadError, TypeError):
    """A value that is not an integer (nor a bool, an enum member, or for a nested layout
    the dict or list of its fields), or a layout that is not an ``amaranth.lib.data`` one."""


class UnknownFieldError(PayloadError, KeyError):
    """A field name the layout does not have."""

    __str__ = ValueError.__str__        # the message, not KeyError's quoted repr of it


def _integer(v, what):
    """*v* as an int through ``__index__`` (PayloadTypeError for a float, a string, ...)."""
    try:
        return operator.index(v)
    except (TypeError, ValueError) as e:       # ValueError: a LogicArray holding X or Z
        raise PayloadTypeError(f"{what} = {v!r} is not an integer") from e


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
            raise PayloadTypeError(f"{layout!r} is not an amaranth.lib.data layout")
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        # the entry holds the layout, so its id is not reused while the entry lives
        entry = _CACHE[id(layout)] = (layout, {name: _Field(name, f) for name, f in layout}, layout.size)
    return entry[1]


def _size(layout):
    """Bits of *layout* (cached with its fields)."""
    _fields(layout)
    return _CACHE[id(layout)][2]


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
            raise UnknownFieldError(f"no field {', '.join(sorted(unknown))}{where} in layout {layout!r}")
        items = values.items()
    elif isinstance(values, (list, tuple)) and isinstance(layout, data.ArrayLayout):
        if len(values) != layout.length:
            raise PayloadError(f"{len(values)} elements for {prefix or 'an array'} of {layout.length}")
        items = enumerate(values)
    else:
        raise PayloadTypeError(f"{prefix or 'payload'}: {values!r} is not the fields of {layout!r}")
    value = 0
    for name, v in items:
        f = fields[name]
        if type(v) is not int:
            if f.layout is not None and isinstance(v, (dict, list, tuple, Mapping)):
                v = _encode(f.layout, v, _path(prefix, name))
            elif isinstance(v, enum.Enum):
                v = v.value
            v = _integer(v, f"field {_path(prefix, name)}")
        if not 0 <= v <= f.mask:
            raise PayloadError(f"field {_path(prefix, name)} = {v:#x} does not fit in {f.width} bits")
        value |= v << f.offset
    return value


def pack(layout, values=None, /, **fields):
    """The integer of a payload of *layout*: its fields by keyword, or *values* (a dict, or a
    list for an array layout); missing fields are zero. :class:`UnknownFieldError` for a
    field the layout does not have, :class:`PayloadTypeError` for a value that is not an
    integer (``2.7``, ``'5'``), :class:`PayloadError` for one that does not fit its field."""
    if values is None:
        return _encode(layout, fields, "")
    if fields:
        raise PayloadTypeError("pack() takes the fields either as a dict/list or as keywords, not both")
    return _encode(layout, values, "")


def unpack(layout, value, *, enums=True, nested=False):
    """``{name: int}`` of a payload integer of *layout*. With *enums*, an enum-shaped field
    whose value is a member gives the member; with *nested*, a field that is a layout gives
    its own dict instead of its int. *value* must be an integer (:class:`PayloadTypeError`
    otherwise) in 0 .. 2**width - 1 of the layout (:class:`PayloadError` otherwise: a
    negative or over-wide value is not a payload of it, and is not silently masked)."""
    value = _integer(value, "payload")
    fields, size = _fields(layout), _size(layout)
    if value < 0 or value >> size:
        raise PayloadError(f"payload {value:#x} does not fit the {size}-bit layout {layout!r}")
    out = {}
    for name, f in fields.items():
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
