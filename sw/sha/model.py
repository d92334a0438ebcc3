"""SHA-384 golden model (FIPS 180-4): the SHA-512 block function with SHA-384's initial
hash value, bit-exact with ``hw.sha`` and able to show its intermediates.

The constants are derived here from their definition, not copied from a table: K[t] is
the first 64 bits of the fractional part of the cube root of the t-th prime (§ 4.2.3), the
SHA-384 initial hash value those of the square roots of the 9th to 16th primes (§ 5.3.4).
The RTL carries its own literal tables (hw/sha/core.py); sw/sha/test_model.py checks this
model against hashlib, so a wrong constant on either side shows.

Byte order as in the RTL's ports: byte *k* of a 128-byte block (of the 48-byte digest) is
byte *k* of the ``bytes`` here, and ``int.from_bytes(b, "little")`` is the port's field.
"""
from dataclasses import dataclass

__all__ = ["K", "IV", "BLOCK_BYTES", "DIGEST_BYTES", "pad", "blocks", "schedule", "compress",
           "trace", "digest", "sha384", "RoundTrace"]

BLOCK_BYTES = 128
DIGEST_BYTES = 48
MASK = (1 << 64) - 1


def _primes(n):
    out, k = [], 2
    while len(out) < n:
        if all(k % p for p in out if p * p <= k):
            out.append(k)
        k += 1
    return out


def _iroot(x, n):
    """floor(x ** (1/n)) for a non-negative integer *x* (Newton's method, exact)."""
    if x < 2:
        return x
    r = 1 << ((x.bit_length() + n - 1) // n)
    while True:
        s = ((n - 1) * r + x // r ** (n - 1)) // n
        if s >= r:
            return r
        r = s


def _frac64(p, n):
    # the first 64 bits of the fractional part of p^(1/n)
    return _iroot(p << (64 * n), n) & MASK


K = tuple(_frac64(p, 3) for p in _primes(80))
IV = tuple(_frac64(p, 2) for p in _primes(16)[8:])


def _rotr(x, n):
    return ((x >> n) | (x << (64 - n))) & MASK


def pad(message: bytes) -> bytes:
    """*message* padded to a whole number of 128-byte blocks (FIPS 180-4 § 5.1.2): a 1 bit,
    zeros, and the length in bits as a 128-bit big-endian integer."""
    length = len(message) * 8
    zeros = (BLOCK_BYTES - (len(message) + 1 + 16) % BLOCK_BYTES) % BLOCK_BYTES
    return bytes(message) + b"\x80" + bytes(zeros) + length.to_bytes(16, "big")


def blocks(message: bytes) -> list:
    """The padded *message* as 128-byte blocks."""
    padded = pad(message)
    return [padded[i:i + BLOCK_BYTES] for i in range(0, len(padded), BLOCK_BYTES)]


def schedule(block: bytes) -> list:
    """The 80 message-schedule words W[0..79] of one 128-byte *block*."""
    if len(block) != BLOCK_BYTES:
        raise ValueError(f"a block is {BLOCK_BYTES} bytes, not {len(block)}")
    w = [int.from_bytes(block[8 * j:8 * j + 8], "big") for j in range(16)]
    for t in range(16, 80):
        s0 = _rotr(w[t - 15], 1) ^ _rotr(w[t - 15], 8) ^ (w[t - 15] >> 7)
        s1 = _rotr(w[t - 2], 19) ^ _rotr(w[t - 2], 61) ^ (w[t - 2] >> 6)
        w.append((s1 + w[t - 7] + s0 + w[t - 16]) & MASK)
    return w


@dataclass(frozen=True)
class RoundTrace:
    """What one block function computes besides its result: the schedule and the working
    variables (a, …, h) after every round."""
    w: tuple        # W[0..79]
    rounds: tuple   # 80 tuples (a, b, c, d, e, f, g, h)
    out: tuple      # the chaining value after the block


def trace(state, block: bytes) -> RoundTrace:
    """The block function on the 8-word chaining value *state* and *block*, with its
    intermediates."""
    state = tuple(state)
    if len(state) != 8 or any(not 0 <= x <= MASK for x in state):
        raise ValueError("a chaining value is eight 64-bit words")
    w = schedule(block)
    a, b, c, d, e, f, g, h = state
    rounds = []
    for t in range(80):
        s1 = _rotr(e, 14) ^ _rotr(e, 18) ^ _rotr(e, 41)
        ch = (e & f) ^ (~e & g)
        t1 = (h + s1 + ch + K[t] + w[t]) & MASK
        s0 = _rotr(a, 28) ^ _rotr(a, 34) ^ _rotr(a, 39)
        maj = (a & b) ^ (a & c) ^ (b & c)
        t2 = (s0 + maj) & MASK
        a, b, c, d, e, f, g, h = (t1 + t2) & MASK, a, b, c, (d + t1) & MASK, e, f, g
        rounds.append((a, b, c, d, e, f, g, h))
    out = tuple((x + y) & MASK for x, y in zip(state, rounds[-1]))
    return RoundTrace(tuple(w), tuple(rounds), out)


def compress(state, block: bytes) -> tuple:
    """The chaining value after *block* (the SHA-512 block function)."""
    return trace(state, block).out


def digest(state) -> bytes:
    """SHA-384's digest of a final chaining value: its first six words, big-endian."""
    return b"".join(x.to_bytes(8, "big") for x in tuple(state)[:6])


def sha384(message: bytes) -> bytes:
    state = IV
    for block in blocks(message):
        state = compress(state, block)
    return digest(state)
