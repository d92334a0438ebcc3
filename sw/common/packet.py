"""The header of an exchange packet (:data:`hw.sxp.packet.Header`) as a dict: the one
constructor behind :func:`sw.pcie.beats.header` (ints, as on the bus) and
:func:`sw.sxp.model.header` (``kind`` a :class:`~hw.sxp.packet.Kind` member, as that model
compares it)."""
import enum

from hw.sxp.packet import Header, Kind

from .payload import PayloadError, UnknownFieldError, _integer, field_slices

__all__ = ["HEADER_FIELDS", "header"]

HEADER_FIELDS = tuple(name for name, _ in Header)
_MASKS = {name: (1 << width) - 1 for name, (_, width) in field_slices(Header).items()}
assert "kind_enum" not in _MASKS        # header()'s own keyword must not shadow a field


def header(*, kind_enum=False, **fields):
    """A full header dict in :data:`HEADER_FIELDS` order: *fields* (ints, bools or enum
    members), every other field 0. ``kind`` is an int, or with *kind_enum* a :class:`Kind`
    member (:class:`~sw.common.payload.PayloadError` for a value that is none). The errors
    are :mod:`sw.common.payload`'s: UnknownFieldError (a KeyError) for a name the header
    does not have, PayloadTypeError (a TypeError) for a value that is not an integer,
    PayloadError (a ValueError) for a value that does not fit its field."""
    unknown = set(fields) - set(HEADER_FIELDS)
    if unknown:
        raise UnknownFieldError(f"no header field {', '.join(sorted(unknown))}")
    hdr = dict.fromkeys(HEADER_FIELDS, 0)
    for name, value in fields.items():
        value = _integer(value.value if isinstance(value, enum.Enum) else value, f"header field {name}")
        if not 0 <= value <= _MASKS[name]:
            raise PayloadError(f"header field {name} = {value:#x} does not fit in "
                               f"{_MASKS[name].bit_length()} bits")
        hdr[name] = value
    if kind_enum:
        try:
            hdr["kind"] = Kind(hdr["kind"])
        except ValueError:
            raise PayloadError(f"header kind {hdr['kind']} names no packet kind") from None
    return hdr
