"""AES-256 forward cipher, written from FIPS-197 for readability rather than speed.

Blocks and keys are ``bytes`` in FIPS-197 byte order (byte 0 first). The RTL carries byte
*k* in bits ``[8k+7:8k]``, so ``int.from_bytes(b, "little")`` converts between the two
(:func:`encrypt_int`).

:func:`encrypt_block` keeps the schedules of the last keys it expanded: the GCM model
encrypts every counter block of a frame under one key, and the key expansion is most of
the cost of a block here.

Errors: a key or block of the wrong size, or an integer out of its 256/128-bit range,
raises :class:`AesInputError` (a ValueError); one of the wrong type (not bytes, not an
int) :class:`AesInputTypeError` (an AesInputError and a TypeError).
"""
import functools

__all__ = ["SBOX", "INV_SBOX", "expand_key", "encrypt_block", "encrypt_int", "ROUNDS",
           "AesInputError", "AesInputTypeError"]

ROUNDS = 14  # AES-256
_BYTES = (bytes, bytearray, memoryview)


class AesInputError(ValueError):
    """A key or block of the wrong size or out of range."""


class AesInputTypeError(AesInputError, TypeError):
    """A key or block that is not bytes (or, for :func:`encrypt_int`, not an int)."""


def _xtime(a):
    """Multiply by x in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1."""
    return ((a << 1) ^ 0x1B) & 0xFF if a & 0x80 else a << 1


def _gf_mul(a, b):
    product = 0
    while b:
        if b & 1:
            product ^= a
        a, b = _xtime(a), b >> 1
    return product


def _make_sbox():
    # Multiplicative inverse (0 ↦ 0) followed by the affine map of FIPS-197 §5.1.1.
    inverse = [0] * 256
    for a in range(1, 256):
        inverse[a] = next(b for b in range(1, 256) if _gf_mul(a, b) == 1)
    sbox = []
    for a in range(256):
        b = inverse[a]
        s = b
        for shift in range(1, 5):
            s ^= ((b << shift) | (b >> (8 - shift))) & 0xFF
        sbox.append(s ^ 0x63)
    return tuple(sbox)


SBOX = _make_sbox()
INV_SBOX = tuple(SBOX.index(v) for v in range(256))


def expand_key(key):
    """The 15 round keys (16 bytes each) of a 32-byte key, FIPS-197 §5.2."""
    if not isinstance(key, _BYTES):
        raise AesInputTypeError(f"an AES key is bytes, not {type(key).__name__}")
    if len(key) != 32:
        raise AesInputError(f"AES-256 needs a 32-byte key, not {len(key)} bytes")
    words = [list(key[4 * i:4 * i + 4]) for i in range(8)]
    rcon = 1
    for i in range(8, 4 * (ROUNDS + 1)):
        temp = list(words[i - 1])
        if i % 8 == 0:
            temp = [SBOX[b] for b in temp[1:] + temp[:1]]
            temp[0] ^= rcon
            rcon = _xtime(rcon)
        elif i % 8 == 4:
            temp = [SBOX[b] for b in temp]
        words.append([a ^ b for a, b in zip(words[i - 8], temp)])
    return [bytes(sum(words[4 * r:4 * r + 4], [])) for r in range(ROUNDS + 1)]


@functools.lru_cache(maxsize=64)
def _round_keys(key):
    return tuple(expand_key(key))


def _mix_column(col):
    a0, a1, a2, a3 = col
    return [
        _xtime(a0) ^ _xtime(a1) ^ a1 ^ a2 ^ a3,
        a0 ^ _xtime(a1) ^ _xtime(a2) ^ a2 ^ a3,
        a0 ^ a1 ^ _xtime(a2) ^ _xtime(a3) ^ a3,
        _xtime(a0) ^ a0 ^ a1 ^ a2 ^ _xtime(a3),
    ]


def encrypt_block(key, block):
    """E_K(block) for a 32-byte key and a 16-byte block (errors: see the module docstring)."""
    if not isinstance(block, _BYTES) or not isinstance(key, _BYTES):
        raise AesInputTypeError(f"AES takes a bytes key and block, not {type(key).__name__} and "
                                f"{type(block).__name__}")
    if len(block) != 16:
        raise AesInputError(f"an AES block is 16 bytes, not {len(block)}")
    round_keys = _round_keys(bytes(key))
    state = [b ^ k for b, k in zip(block, round_keys[0])]  # state[4c + r]: column c, row r
    for rnd in range(1, ROUNDS + 1):
        state = [SBOX[b] for b in state]
        state = [state[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4)]  # ShiftRows
        if rnd != ROUNDS:
            state = sum((_mix_column(state[4 * c:4 * c + 4]) for c in range(4)), [])
        state = [b ^ k for b, k in zip(state, round_keys[rnd])]
    return bytes(state)


def encrypt_int(key, block):
    """:func:`encrypt_block` on bus-lane integers (byte *k* in bits 8k+7..8k): a 256-bit
    key and a 128-bit block (errors: see the module docstring)."""
    if type(key) is not int or type(block) is not int:
        raise AesInputTypeError(f"encrypt_int takes ints, not {type(key).__name__} and {type(block).__name__}")
    if key >> 256 or block >> 128 or key < 0 or block < 0:
        raise AesInputError("the key is a 256-bit and the block a 128-bit unsigned int")
    ct = encrypt_block(key.to_bytes(32, "little"), block.to_bytes(16, "little"))
    return int.from_bytes(ct, "little")
