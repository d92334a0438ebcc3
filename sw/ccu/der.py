"""Just enough DER (X.690) for the measurement extension: SEQUENCE, UTF8String, OCTET
STRING and OBJECT IDENTIFIER as pre-encoded bytes. Decoding is strict (definite minimal
lengths, no trailing bytes) so that one extension value has exactly one encoding.
Every malformed input raises :class:`DerError` (a ValueError), input that is not bytes
:class:`DerTypeError` (a DerError and a TypeError)."""

__all__ = ["SEQUENCE", "UTF8STRING", "OCTET_STRING", "OID", "tlv", "read_tlv", "read_all",
           "DerError", "DerTypeError"]

SEQUENCE, UTF8STRING, OCTET_STRING, OID = 0x30, 0x0C, 0x04, 0x06


class DerError(ValueError):
    """DER bytes that are not what the decoder accepts (truncated, non-minimal, wrong tag)."""


class DerTypeError(DerError, TypeError):
    """DER input that is not bytes."""


def _check_bytes(buf):
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise DerTypeError(f"DER input must be bytes, not {type(buf).__name__}")


def tlv(tag: int, content: bytes) -> bytes:
    """One DER element: tag, minimal definite length, content."""
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def read_tlv(buf: bytes, pos: int = 0) -> tuple[int, bytes, int]:
    """(tag, content, next position) of the element at ``pos``; DerError if malformed
    (DerTypeError if *buf* is not bytes or *pos* not an int)."""
    _check_bytes(buf)
    if type(pos) is not int:
        raise DerTypeError(f"DER position must be an int, not {pos!r}")
    if pos < 0 or pos + 2 > len(buf):
        raise DerError("DER element truncated")
    tag, first = buf[pos], buf[pos + 1]
    pos += 2
    if first < 0x80:
        n = first
    else:
        k = first & 0x7F
        if k == 0 or k > 4 or pos + k > len(buf) or buf[pos] == 0:
            raise DerError("bad DER length")
        n = int.from_bytes(buf[pos:pos + k], "big")
        pos += k
        if n < 0x80:
            raise DerError("non-minimal DER length")
    if pos + n > len(buf):
        raise DerError("DER element truncated")
    return tag, bytes(buf[pos:pos + n]), pos + n


def read_all(buf: bytes, tag: int) -> list[bytes]:
    """Contents of consecutive elements filling ``buf``, each of the given tag (DerError
    for a malformed element or another tag)."""
    _check_bytes(buf)
    out, pos = [], 0
    while pos < len(buf):
        t, content, pos = read_tlv(buf, pos)
        if t != tag:
            raise DerError(f"expected DER tag 0x{tag:02x}, found 0x{t:02x}")
        out.append(content)
    return out
