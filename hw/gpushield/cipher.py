"""The GPUShield buffer-id cipher as a circuit (docs/gpushield.md, "Id cipher").

A 4-round Feistel network on two 7-bit halves of the 14-bit id. Round key
``k_r = K[16r+15 : 16r]``; ``F(x, k) = (SBOX[(x ^ k) & 0xFF] ^ (k >> 8)) & 0x7F``. The
input byte of the S-box is ``{k[7], x ^ k[6:0]}`` (x has 7 bits). Decryption runs the
rounds backwards: ``(L, R) <- (R ^ F(L, k_r), L)`` for r = 3 .. 0. One round is one
S-box deep (16 gate levels), so the BCU runs one round per pipeline stage
(:func:`decrypt_round`); :func:`decrypt_id` chains all four (tests, and the reference for
the pipelined form). :mod:`sw.gpushield.model` is the software twin, which the driver uses
to encrypt.
"""
from amaranth.hdl import Cat, Signal, Value

from hw.aes.sbox import sbox

from .layout import HALF_BITS, ID_BITS, KEY_BITS

__all__ = ["ROUNDS", "feistel_f", "decrypt_round", "decrypt_id", "encrypt_id"]

ROUNDS = 4


def _wire(m, value, name):
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def feistel_f(m, x, k, name):
    """``F(x, k)``: 7-bit *x*, 16-bit round key *k*; a 7-bit value."""
    byte = Cat(x ^ k[:HALF_BITS], k[HALF_BITS])
    s = sbox(m, byte, name=name)
    return (s ^ k[8:16])[:HALF_BITS]


def _round_keys(key):
    return [key[16 * r:16 * r + 16] for r in range(ROUNDS)]


def decrypt_round(m, state, key, r, name="dec"):
    """Decryption round *r* (3 first, 0 last) on the 14-bit *state* ``{R, L}`` (R in the
    low half, as the ciphertext and the plain id are laid out)."""
    state, key = Value.cast(state), Value.cast(key)
    assert len(state) == ID_BITS and len(key) == KEY_BITS and 0 <= r < ROUNDS
    left, right = state[HALF_BITS:], state[:HALF_BITS]
    f = feistel_f(m, left, _round_keys(key)[r], f"{name}_r{r}")
    return Cat(left, _wire(m, right ^ f, f"{name}_l{r}"))


def decrypt_id(m, enc, key, name="dec"):
    """The 14-bit id whose encryption under the 64-bit *key* is *enc* (all four rounds)."""
    state = Value.cast(enc)
    for r in reversed(range(ROUNDS)):
        state = decrypt_round(m, state, key, r, name)
    return state


def encrypt_id(m, plain, key, name="enc"):
    """The encryption of the 14-bit *plain* under *key* (not used by the BCU; for tests)."""
    plain, key = Value.cast(plain), Value.cast(key)
    left, right = plain[HALF_BITS:], plain[:HALF_BITS]
    for r, k in enumerate(_round_keys(key)):
        f = feistel_f(m, right, k, f"{name}_r{r}")
        left, right = right, _wire(m, left ^ f, f"{name}_r{r}_out")
    return Cat(right, left)
