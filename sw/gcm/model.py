"""Bit-exact golden model of the ``gcm_core`` engine (docs/gcm.md).

AES-256-GCM (NIST SP 800-38D) restricted as in the ITX paper: empty AAD, block-aligned
non-empty plaintext, and the IV given as a full block J0 = 12-byte nonce ‖ ``00 00 00 01``.
Blocks, keys and tags are integers in bus lane order (byte *k* in bits ``8k+7..8k``, i.e.
``int.from_bytes(b, "little")``), exactly as on the ``i``/``o``/``key`` streams.

Per context the model keeps what the RTL keeps: the key, the hash subkey H = E_K(0¹²⁸),
the 96-bit nonce and the 32-bit counter of the current counter block, the partial GHASH X,
an ``active`` flag (a frame is open) and a ``has_key`` flag. The block count is not stored:
it is ``ctr - 2`` (mod 2³²), since the counter starts at 2 for the first data block.
E_K(J0) is not stored either: MAC recomputes it (the RTL sends J0 through the AES pipeline
for the MAC op), which gives the same tag.

Beats (:meth:`GcmCoreModel.step`), in the order the core accepts them. A core of
``lanes`` = L takes L consecutive blocks of one frame per beat (lane *k* = the block at
byte offset 16·k); the model processes a beat's blocks one after the other, in block
order, exactly as L = 1 beats would (GHASH by Horner's rule with H alone: the RTL's
powers of H are checked against this, not copied from it). A frame (IV + data + tag) is
a whole number of beats, at least two:

- ``Op.IV``: on an idle context with a key and lane 0's bytes 12..15 = ``00 00 00 01``:
  nonce = lane 0 bytes 0..11, counter = 2, X = 0, active; output lane 0 = the IV block
  unchanged; lanes 1..L-1 are the frame's first data blocks (as DATA below). A bad IV tail
  is ``err`` (the context stays idle). IV on an active context is ``err`` and the context
  goes idle: the unfinished frame is abandoned and never yields a tag.
- ``Op.DATA`` (active context), per lane: ``block ⊕ E_K(counter block)``; X = (X ⊕ C)·H
  where C is the ciphertext — the *input* block when ``decrypt`` = 1, the *output* block
  when ``decrypt`` = 0; the counter advances (inc32, wrapping like GCM's inc32).
- ``Op.MAC`` (active context): lanes 0..L-2 are the frame's last data blocks (as DATA);
  lane L-1 is the tag slot: tag = ((X ⊕ len-block)·H) ⊕ E_K(J0) with
  len-block = 0⁶⁴ ‖ [128·count]₆₄, count = data blocks of the frame = counter − 2;
  output lane L-1 = tag; ``tag_ok`` = 1 only for a decryption whose lane L-1 equals the
  tag (constant-time compare); for an encryption ``tag_ok`` = 0. X is cleared and the
  context goes idle.
- ``Op.NOP``: the beat passes through unchanged (``tag_ok`` = ``err`` = 0), whatever the
  context number, key or frame state; no context is read or written.
- ``err`` (DATA or MAC on an idle context, IV/DATA/MAC on a context without a key or with
  a number >= ``contexts``): the whole output beat is 0 and ``tag_ok`` = 0. Apart from
  IV-on-active (context goes idle), an err changes nothing.

Decisions the contract leaves open:

- :meth:`install_key` on a context abandons any frame open on it: the context goes idle
  (X cleared), so a DATA or MAC that follows errs until a new IV opens a frame.
- :meth:`install_key` to a context number >= ``contexts`` is ignored (the key port has no
  error channel).
- :meth:`reset` scrubs every context (key, H, nonce, counter, X, flags) to zero; afterwards
  every op but NOP answers ``err`` until the context gets a key.

Errors: an input that does not fit its field on the core's ports — a ``ctx`` that is not
a 4-bit value, a key or beat out of its 256/128·L-bit range, an ``op`` that is no
:class:`Op`, a ``decrypt`` that is not 0 or 1, a nonce that is not 12 bytes — raises
:class:`GcmInputError` (a ValueError), and :class:`GcmInputTypeError` (also a TypeError)
when it is not an int (bytes for a nonce) at all. Such an input is refused before the
model changes state: it is not something the core's ports can carry.
"""
import hmac
import operator
from dataclasses import dataclass

from hw.gcm.layout import BLOCK_BITS, CTX_BITS, KEY_BITS, Op, check_contexts, check_lanes
from sw.aes.model import encrypt_int

__all__ = ["GcmCoreModel", "GcmInputError", "GcmInputTypeError", "Op", "gf128_mul", "ghash_mul_bus", "j0_block",
           "len_block",
           "counter_block", "J0_TAIL", "split_beat", "join_beat", "frame_beats", "h_powers",
           "FrameSecrets", "frame_secrets"]

BLOCK_MASK = (1 << BLOCK_BITS) - 1
KEY_MASK = (1 << KEY_BITS) - 1
NONCE_BITS = 96
NONCE_MASK = (1 << NONCE_BITS) - 1
CTR_MASK = 0xFFFF_FFFF
J0_TAIL = bytes([0, 0, 0, 1])            # bytes 12..15 of a valid IV block
_R = 0xE1 << 120                         # SP 800-38D reduction constant


def gf128_mul(x, y):
    """X·Y in GF(2^128), SP 800-38D Algorithm 1. *x*, *y* are the 16-byte blocks read as
    big-endian integers, so the most significant bit is the coefficient of x^0."""
    z, v = 0, y
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            z ^= v
        v = (v >> 1) ^ _R if v & 1 else v >> 1
    return z


def _be(bus):
    return int.from_bytes(bus.to_bytes(16, "little"), "big")


def _bus(be):
    return int.from_bytes(be.to_bytes(16, "big"), "little")


def ghash_mul_bus(a, b):
    """:func:`gf128_mul` on blocks in bus lane order."""
    return _bus(gf128_mul(_be(a), _be(b)))


class GcmInputError(ValueError):
    """A port input of the GCM model that does not fit its field."""


class GcmInputTypeError(GcmInputError, TypeError):
    """A port input of the GCM model that is not an int (a nonce: not bytes)."""


def _field(value, bits, what):
    """*value* as an int of *bits* bits (GcmInputError/GcmInputTypeError otherwise)."""
    if type(value) is not int:
        if isinstance(value, (float, str, bytes)) or not hasattr(value, "__index__"):
            raise GcmInputTypeError(f"{what} must be an int, not {value!r}")
        value = operator.index(value)
    if value < 0 or value >> bits:
        raise GcmInputError(f"{what} is a {bits}-bit field, not {value:#x}")
    return value


def counter_block(nonce, ctr):
    """The counter block nonce ‖ [ctr]₃₂ (big-endian counter) in bus lane order;
    *nonce* is the 96-bit bus-lane integer of bytes 0..11."""
    return nonce | int.from_bytes(ctr.to_bytes(4, "big"), "little") << NONCE_BITS


def j0_block(nonce):
    """The IV block J0 = *nonce* (12 bytes) ‖ 00 00 00 01 in bus lane order."""
    if not isinstance(nonce, (bytes, bytearray, memoryview)):
        raise GcmInputTypeError(f"the nonce is bytes, not {type(nonce).__name__}")
    if len(nonce) != 12:
        raise GcmInputError(f"the nonce is 12 bytes, not {len(nonce)}")
    return int.from_bytes(bytes(nonce) + J0_TAIL, "little")


def len_block(count):
    """The GHASH length block for empty AAD and *count* ciphertext blocks, bus lane order."""
    return int.from_bytes(bytes(8) + (count * BLOCK_BITS).to_bytes(8, "big"), "little")


def split_beat(beat, lanes):
    """The *lanes* 128-bit blocks of a beat integer, lane 0 first."""
    return [(beat >> (BLOCK_BITS * k)) & BLOCK_MASK for k in range(lanes)]


def join_beat(blocks):
    """The beat integer of consecutive blocks (lane 0 first)."""
    return sum(b << (BLOCK_BITS * k) for k, b in enumerate(blocks))


def frame_beats(nonce, blocks, lanes, mac=0):
    """The ``(op, beat)`` pairs of one frame: J0, the data *blocks* and the tag slot *mac*
    cut into beats of *lanes* blocks (IV first, MAC last, DATA between). ValueError if
    the frame is not a whole number of beats or shorter than two."""
    seq = [j0_block(nonce)] + list(blocks) + [mac]
    if len(seq) % lanes or len(seq) < 2 * lanes:
        raise ValueError(f"a frame of {len(seq)} blocks is not a whole number (>= 2) of "
                         f"{lanes}-block beats")
    beats = [join_beat(seq[i:i + lanes]) for i in range(0, len(seq), lanes)]
    ops = [Op.IV] + [Op.DATA] * (len(beats) - 2) + [Op.MAC]
    return list(zip(ops, beats))


def h_powers(key, count):
    """[H, H², …, H^count] of the 256-bit bus-lane *key* (H = E_K(0¹²⁸)), bus-lane ints: the
    powers a core of ``lanes`` = count keeps or derives per context."""
    h = encrypt_int(key, 0)
    out = [h]
    while len(out) < count:
        out.append(ghash_mul_bus(out[-1], h))
    return out


@dataclass
class FrameSecrets:
    """What one frame derives from its key, as bus-lane ints (:func:`frame_secrets`)."""
    h: int              # the hash subkey E_K(0¹²⁸)
    ek0: int            # E_K(J0): the tag mask
    x: list             # the partial hash after the IV (0) and after each data block
    s: int              # GHASH of the whole frame (after the length block): tag = S ⊕ E_K(J0)
    tag: int


def frame_secrets(key, nonce, blocks, decrypt=False):
    """The secrets a frame under *key* (256-bit bus-lane int) with the 12-byte *nonce* and
    the data *blocks* (bus-lane ints: the plaintext for ``decrypt`` = False, the ciphertext
    for True) leaves in an engine, computed by running the frame through
    :class:`GcmCoreModel` (one context, one block per beat) and reading the context's
    partial hash after every beat. A core of ``lanes`` = L holds the partial hash only
    after every L blocks: a subset of :attr:`FrameSecrets.x`."""
    model = GcmCoreModel(contexts=1, lanes=1)
    model.install_key(0, key)
    ctx = model._ctx[0]
    model.step(j0_block(nonce), 0, Op.IV, decrypt)
    x = [ctx.x]
    for b in blocks:
        model.step(b, 0, Op.DATA, decrypt)
        x.append(ctx.x)
    s = ghash_mul_bus(ctx.x ^ len_block(len(blocks)), ctx.h)
    ek0 = encrypt_int(key, j0_block(nonce))
    tag, _, err = model.step(0, 0, Op.MAC, decrypt)
    assert not err and tag == s ^ ek0
    return FrameSecrets(h=ctx.h, ek0=ek0, x=x, s=s, tag=tag)


@dataclass
class _Context:
    key: int = 0
    h: int = 0
    nonce: int = 0
    ctr: int = 0
    x: int = 0
    active: bool = False
    has_key: bool = False


class GcmCoreModel:
    """The ``gcm_core`` engine with *contexts* physical key contexts (1..16) and *lanes*
    (1, 2, 4) blocks per beat.

    :meth:`install_key` and :meth:`step` must be called in the order the core accepts the
    ``key`` and ``i`` transfers; :meth:`step` returns what ``o`` shows for that beat.
    """

    def __init__(self, contexts=16, lanes=1):
        self.contexts = check_contexts(contexts)
        self.lanes = check_lanes(lanes)
        self.reset()

    def reset(self):
        """Scrub every context to zero (no key, idle)."""
        self._ctx = [_Context() for _ in range(self.contexts)]

    def context(self, ctx):
        """A copy of context *ctx*'s state (for tests and debugging)."""
        c = self._ctx[ctx]
        return _Context(**vars(c))

    @staticmethod
    def _check_ctx(ctx):
        return _field(ctx, CTX_BITS, "ctx")

    def install_key(self, ctx, key):
        """Install *key* (256-bit bus-lane int) in context *ctx*: H = E_K(0); idle.
        GcmInputError for a ctx or key that does not fit its field."""
        ctx = self._check_ctx(ctx)
        key = _field(key, KEY_BITS, "key")
        if ctx >= self.contexts:
            return
        self._ctx[ctx] = _Context(key=key, h=encrypt_int(key, 0), has_key=True)

    def step(self, block, ctx, op, decrypt):
        """One ``i`` transfer (*block*: the beat, 128·lanes bits); returns
        ``(o.block, o.tag_ok, o.err)`` as ints. GcmInputError for an input that does not
        fit its field (see the module docstring), before anything changes."""
        ctx = self._check_ctx(ctx)
        lanes = self.lanes
        block = _field(block, BLOCK_BITS * lanes, "block")
        if not isinstance(op, Op):
            try:
                op = Op(_field(op, 2, "op"))      # every 2-bit code is an op
            except ValueError as e:
                raise GcmInputError(f"op {op!r} is no Op") from e
        decrypt = bool(_field(decrypt, 1, "decrypt"))
        if op is Op.NOP:
            return block, 0, 0
        if ctx >= self.contexts:
            return self._err()
        c = self._ctx[ctx]
        if not c.has_key:
            return self._err()
        blocks = split_beat(block, lanes)

        if op is Op.IV:
            if c.active:
                c.active = False          # abandon the open frame
                c.x = 0
                return self._err()
            if blocks[0] >> NONCE_BITS != int.from_bytes(J0_TAIL, "little"):
                return self._err()
            c.nonce, c.ctr, c.x, c.active = blocks[0] & NONCE_MASK, 2, 0, True
            return join_beat([blocks[0]] + [self._data(c, b, decrypt) for b in blocks[1:]]), 0, 0

        if not c.active:
            return self._err()

        if op is Op.DATA:
            return join_beat([self._data(c, b, decrypt) for b in blocks]), 0, 0

        # Op.MAC: the last data blocks, then the tag slot
        out = [self._data(c, b, decrypt) for b in blocks[:-1]]
        count = (c.ctr - 2) & CTR_MASK
        s = ghash_mul_bus(c.x ^ len_block(count), c.h)
        tag = s ^ encrypt_int(c.key, counter_block(c.nonce, 1))
        tag_ok = decrypt and hmac.compare_digest(tag.to_bytes(16, "little"),
                                                 blocks[-1].to_bytes(16, "little"))
        c.x, c.active = 0, False
        return join_beat(out + [tag]), int(tag_ok), 0

    @staticmethod
    def _data(c, block, decrypt):
        """One data block: the output block; folds the ciphertext into X, advances ctr."""
        out = block ^ encrypt_int(c.key, counter_block(c.nonce, c.ctr))
        c.x = ghash_mul_bus(c.x ^ (block if decrypt else out), c.h)
        c.ctr = (c.ctr + 1) & CTR_MASK
        return out

    @staticmethod
    def _err():
        return 0, 0, 1
