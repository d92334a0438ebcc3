"""Just enough DER (X.690) for the measurement extension: SEQUENCE, UTF8String, OCTET
STRING and OBJECT IDENTIFIER as pre-encoded bytes. Decoding is strict (definite minimal
lengths, no trailing bytes) so that one extension value has exactly one encoding."""

__all__ = ["SEQUENCE", "UTF8STRING", "OCTET_STRING", "OID", "tlv", "read_tlv", "read_all"]

SEQUENCE, UTF8STRING, OCTET_STRING, OID = 0x30, 0x0C, 0x04, 0x06


def tlv(tag: int, content: bytes) -> bytes:
    """One DER element: tag, minimal definite length, content."""
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def read_tlv(buf: bytes, pos: int = 0) -> tuple[int, bytes, int]:
    """(tag, content, next position) of the element at ``pos``; ValueError if malformed."""
    if pos + 2 > len(buf):
        raise ValueError("DER element truncated")
    tag, first = buf[pos], buf[pos + 1]
    pos += 2
    if first < 0x80:
        n = first
    else:
        k = first & 0x7F
        if k == 0 or k > 4 or pos + k > len(buf) or buf[pos] == 0:
            raise ValueError("bad DER length")
        n = int.from_bytes(buf[pos:pos + k], "big")
        pos += k
        if n < 0x80:
            raise ValueError("non-minimal DER length")
    if pos + n > len(buf):
        raise ValueError("DER element truncated")
    return tag, bytes(buf[pos:pos + n]), pos + n


def read_all(buf: bytes, tag: int) -> list[bytes]:
    """Contents of consecutive elements filling ``buf``, each of the given tag."""
    out, pos = [], 0
    while pos < len(buf):
        t, content, pos = read_tlv(buf, pos)
        if t != tag:
            raise ValueError(f"expected DER tag 0x{tag:02x}, found 0x{t:02x}")
        out.append(content)
    return out
