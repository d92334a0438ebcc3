"""Test-vector helpers shared by the golden-model tests and the cocotb testbench: the NIST
CAVP GCM cases that fit the engine, and conversions to bus-lane integers."""
from sw.cavp import open_rsp, parse_rsp

__all__ = ["le", "blocks_of", "cavp_cases"]


def le(b: bytes) -> int:
    """Bytes to a bus-lane integer (byte k in bits 8k+7..8k)."""
    return int.from_bytes(b, "little")


def blocks_of(data: bytes):
    """The 16-byte blocks of *data* as bus-lane integers."""
    if len(data) % 16:
        raise ValueError(f"{len(data)} bytes is not a whole number of blocks")
    return [le(data[i:i + 16]) for i in range(0, len(data), 16)]


def cavp_cases(name):
    """Records of CAVP file *name* (``gcmEncryptExtIV256.rsp``, ``gcmDecrypt256.rsp``) that
    fit the engine: 256-bit key, 96-bit IV, empty AAD, 128-bit tag, non-empty block-aligned
    text. FAIL records (decryption) included."""
    for rec in parse_rsp(open_rsp("ciphers", "AES", "GCM", name)):
        s = rec["section"]
        ptlen = int(s.get("PTlen", "0"))
        if (s.get("Keylen") == "256" and s.get("IVlen") == "96" and s.get("AADlen") == "0"
                and s.get("Taglen") == "128" and ptlen > 0 and ptlen % 128 == 0):
            yield rec
