"""Frame helpers shared by the model tests, the cocotb regression and the benchmark.

A frame (DESIGN.md § sxp) is 128·n bytes, at most 1 KiB: the IV block (12-byte nonce ‖
``00 00 00 01``), the data blocks, and the 16-byte tag slot. Blocks are ints in bus lane
order (``int.from_bytes(b, "little")``).
"""
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.sxp.packet import BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES

__all__ = ["iv_block", "blocks_of", "bytes_of", "write_frame", "sealed_frame", "open_frame",
           "split_sizes", "FRAME_SIZES"]

FRAME_SIZES = list(range(128, MAX_FRAME_BYTES + 1, 128))


def iv_block(nonce: bytes) -> int:
    return int.from_bytes(bytes(nonce) + b"\0\0\0\1", "little")


def blocks_of(data: bytes):
    return [int.from_bytes(data[k:k + BEAT_BYTES], "little") for k in range(0, len(data), BEAT_BYTES)]


def bytes_of(blocks):
    return b"".join(b.to_bytes(BEAT_BYTES, "little") for b in blocks)


def write_frame(nonce: bytes, plaintext: bytes):
    """What a tile writes: IV block, plaintext blocks, an empty tag slot."""
    return [iv_block(nonce)] + blocks_of(plaintext) + [0]


def sealed_frame(key: bytes, nonce: bytes, plaintext: bytes):
    """What the host stores (OpenSSL): IV block, ciphertext blocks, tag."""
    ct = AESGCM(key).encrypt(nonce, plaintext, None)
    return [iv_block(nonce)] + blocks_of(ct)


def open_frame(key: bytes, blocks):
    """Decrypt a sealed frame with OpenSSL: the plaintext (raises InvalidTag if forged)."""
    iv = bytes_of(blocks[:1])
    if iv[12:] != b"\0\0\0\1":
        raise ValueError(f"IV block tail {iv[12:].hex()} is not 00000001")
    return AESGCM(key).decrypt(iv[:12], bytes_of(blocks[1:]), None)


def split_sizes(total_bytes, rng, max_bytes=MAX_PAYLOAD_BYTES, boundary=None):
    """Random packet sizes (16..max_bytes, multiples of 16) that add up to *total_bytes*."""
    sizes, left = [], total_bytes
    while left:
        s = min(left, BEAT_BYTES * rng.randint(1, max_bytes // BEAT_BYTES))
        sizes.append(s)
        left -= s
    return sizes
