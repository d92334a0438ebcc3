"""Confidential streams → encrypted frames (ITX § confidential streams, checkpoints).

A stream is cut into equally sized frames of ``frame_bytes`` = 128·n bytes (n = 1..8, at
most :data:`~hw.sxp.packet.MAX_FRAME_BYTES`, the largest PCIe read), each::

    IV block (16 B) = nonce (12 B) ‖ 00 00 00 01  |  ciphertext (frame_bytes - 32 B)  |  tag (16 B)

encrypted with standard AES-256-GCM, empty AAD, under the stream's key — exactly what
``gcm_core`` produces and consumes (J0 = nonce ‖ 0x00000001). The last frame's payload is
padded with zero bytes; the reader knows the stream length and strips the padding.

Nonces (96 bits) are built from fields by :class:`NonceLayout`; the layouts are defined
once here (:data:`STREAM_NONCE`, :data:`CHECKPOINT_NONCE`) and documented in docs/itx.md.
Every layout starts with the same 8-bit ``type`` field (:class:`StreamType`, never 0), so
nonces of different types can never be equal, and a layout is injective on its fields
(each field has its own bits, values out of range are refused rather than wrapped): a
nonce repeats under one key only if the same (type, fields) tuple is encrypted twice.

Errors: every function here raises :class:`FrameError` (a ValueError) for an argument the
protocol does not allow — a nonce that is not 12 bytes or names no type, a field out of
range, a frame size that is not 128·n, a stream blob that is not exactly the frames its
length takes — and :class:`FrameTypeError` (a FrameError and a TypeError) for an argument
of the wrong type (a nonce or blob that is not bytes, a size that is not an int). A frame
that does not authenticate raises cryptography's ``InvalidTag``.
"""
import enum
import operator

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.sxp.packet import MAX_FRAME_BYTES

__all__ = ["StreamType", "NonceLayout", "STREAM_NONCE", "CHECKPOINT_NONCE", "NONCE_BYTES",
           "IV_BYTES", "TAG_BYTES", "FRAME_QUANTUM", "J0_TAIL", "stream_nonce",
           "checkpoint_nonce", "nonce_type", "iv_block", "check_frame_bytes", "payload_bytes",
           "frame_count", "encrypt_frame", "decrypt_frame", "encrypt_stream",
           "decrypt_stream", "FrameError", "FrameTypeError"]

NONCE_BYTES = 12
IV_BYTES = 16
TAG_BYTES = 16
FRAME_QUANTUM = 128                 # frame sizes are multiples of this (ITX: 128·n bytes)
J0_TAIL = (1).to_bytes(4, "big")    # gcm_core takes J0 = nonce ‖ 00 00 00 01


class FrameError(ValueError):
    """A frame or stream argument that the protocol does not allow."""


class FrameTypeError(FrameError, TypeError):
    """A frame or stream argument of the wrong type (not bytes, not an int)."""


_BYTES = (bytes, bytearray, memoryview)


def _bytes(value, what):
    if not isinstance(value, _BYTES):
        raise FrameTypeError(f"{what} must be bytes, not {type(value).__name__}")
    return bytes(value)


def _int(value, what):
    if isinstance(value, bool):
        raise FrameTypeError(f"{what} must be an int, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise FrameTypeError(f"{what} must be an int, not {value!r}") from None


class StreamType(enum.IntEnum):
    """The first nonce byte. 0 is never used, so an all-zero nonce is never valid."""
    CODE = 1         # application binary, read by the tile bootloader
    DATA = 2         # input data stream
    CHECKPOINT = 3   # tile state written/read by the checkpoint writer/reader


class NonceLayout:
    """A 96-bit nonce as named fields, most significant first (big-endian bytes).

    ``fields`` is a sequence of (name, bits); the first must be ``("type", 8)`` and the
    widths must add up to 96."""

    def __init__(self, stream_type, fields):
        fields = tuple((str(n), int(b)) for n, b in fields)
        if fields[0] != ("type", 8):
            raise ValueError("a nonce layout starts with the 8-bit type field")
        if sum(b for _, b in fields) != 8 * NONCE_BYTES:
            raise ValueError(f"nonce fields add up to {sum(b for _, b in fields)} bits, not 96")
        if len({n for n, _ in fields}) != len(fields):
            raise ValueError("duplicate nonce field name")
        self.type = StreamType(stream_type)
        self.fields = fields
        self.offsets = {}
        at = 8 * NONCE_BYTES
        for name, bits in fields:
            at -= bits
            self.offsets[name] = (at, bits)
        # encode's fast path: the type word, then (name, offset, bits) of the other fields
        self._type_word = int(self.type) << self.offsets["type"][0]
        self._spec = tuple((n, *self.offsets[n]) for n, _ in fields[1:])

    def encode(self, **values):
        """The 12-byte nonce of *values* (every field but ``type``, ints): FrameError for a
        missing or unknown field or a value out of range, FrameTypeError for a non-int."""
        if len(values) != len(self._spec) or not values.keys() <= self.offsets.keys():
            raise FrameError(f"{self.type.name} nonce needs fields {list(self.offsets)[1:]}, "
                             f"got {sorted(values)}")
        word = self._type_word
        for name, offset, bits in self._spec:
            v = _int(values[name], f"{self.type.name} nonce field {name}")
            if v < 0 or v >> bits:
                raise FrameError(f"{self.type.name} nonce field {name} = {v} does not fit in "
                                 f"{bits} bits (refused: wrapping would repeat a nonce)")
            word |= v << offset
        return word.to_bytes(NONCE_BYTES, "big")

    def decode(self, nonce):
        """``{field: int}`` of a nonce of this layout: FrameError if it is not 12 bytes or
        its type byte is not this layout's, FrameTypeError if it is not bytes."""
        nonce = _bytes(nonce, "a nonce")
        if len(nonce) != NONCE_BYTES:
            raise FrameError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
        word = int.from_bytes(nonce, "big")
        out = {n: (word >> o) & ((1 << b) - 1) for n, (o, b) in self.offsets.items()}
        if out["type"] != self.type:
            raise FrameError(f"nonce type {out['type']} is not {self.type.name}")
        return out

    def markdown(self):
        rows = ["| bits | field | width |", "|---|---|---|"]
        for name, (offset, bits) in self.offsets.items():
            rows.append(f"| {offset + bits - 1}..{offset} | `{name}` | {bits} |")
        return "\n".join(rows)


# Code and data streams: the paper's "stream type ‖ stream identifier ‖ frame index".
STREAM_NONCE = {t: NonceLayout(t, [("type", 8), ("stream", 32), ("frame", 56)])
                for t in (StreamType.CODE, StreamType.DATA)}
# Checkpoints: "checkpoint type ‖ epoch ‖ checkpoint id ‖ IPU id ‖ tile id ‖ frame index".
# The tile id field is 16 bits (11 are used: 1472 tiles) so every field is byte aligned.
CHECKPOINT_NONCE = NonceLayout(StreamType.CHECKPOINT, [
    ("type", 8), ("epoch", 16), ("checkpoint", 16), ("ipu", 8), ("tile", 16), ("frame", 32)])


_STREAM_FAST = {t: (layout._type_word, layout.offsets["stream"], layout.offsets["frame"])
                for t, layout in STREAM_NONCE.items()}


def stream_nonce(stream_type, stream_id, frame):
    """The nonce of frame *frame* of code/data stream *stream_id* (the shim calls this once
    per frame, so the common case is computed without the generic field walk). FrameError
    for a type that is not CODE or DATA or a field out of range, FrameTypeError for a
    non-int field."""
    try:
        fast = _STREAM_FAST.get(stream_type)
    except TypeError:           # unhashable
        fast = None
    if fast is None:
        raise FrameError(f"{stream_type!r} is not a code/data stream type")
    word, (so, sb), (fo, fb) = fast
    if type(stream_id) is not int or type(frame) is not int or \
            stream_id < 0 or stream_id >> sb or frame < 0 or frame >> fb:
        return STREAM_NONCE[stream_type].encode(stream=stream_id, frame=frame)  # raises
    return (word | stream_id << so | frame << fo).to_bytes(NONCE_BYTES, "big")


def checkpoint_nonce(epoch, checkpoint, ipu, tile, frame):
    """The nonce of a checkpoint frame (:data:`CHECKPOINT_NONCE`; errors as its encode)."""
    return CHECKPOINT_NONCE.encode(epoch=epoch, checkpoint=checkpoint, ipu=ipu, tile=tile,
                                   frame=frame)


def nonce_type(nonce):
    """The :class:`StreamType` of a nonce: FrameError if it is not 12 bytes or its type
    byte names no stream type, FrameTypeError if it is not bytes."""
    nonce = _bytes(nonce, "a nonce")
    if len(nonce) != NONCE_BYTES:
        raise FrameError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
    try:
        return StreamType(nonce[0])
    except ValueError:
        raise FrameError(f"nonce type byte {nonce[0]} names no stream type") from None


def iv_block(nonce):
    """The 16-byte IV block of a frame: nonce ‖ 00 00 00 01 (FrameError/FrameTypeError for
    a nonce that is not 12 bytes)."""
    nonce = _bytes(nonce, "a nonce")
    if len(nonce) != NONCE_BYTES:
        raise FrameError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
    return bytes(nonce) + J0_TAIL


def check_frame_bytes(frame_bytes):
    """*frame_bytes* if it is a legal frame size (128·n, n = 1..8): FrameTypeError for a
    non-int, FrameError for any other size."""
    if not isinstance(frame_bytes, int) or isinstance(frame_bytes, bool):
        raise FrameTypeError(f"frame size must be an int, not {frame_bytes!r}")
    if frame_bytes % FRAME_QUANTUM or not FRAME_QUANTUM <= frame_bytes <= MAX_FRAME_BYTES:
        raise FrameError(f"frame size {frame_bytes}: a multiple of {FRAME_QUANTUM} in "
                         f"{FRAME_QUANTUM}..{MAX_FRAME_BYTES} bytes (IV and tag included)")
    return frame_bytes


def payload_bytes(frame_bytes):
    """Plaintext bytes a frame carries: the frame less the IV block and the tag."""
    return check_frame_bytes(frame_bytes) - IV_BYTES - TAG_BYTES


def frame_count(length, frame_bytes):
    """Frames a stream of *length* bytes takes (at least one: GCM plaintext is not empty).
    FrameError for a negative length or an illegal frame size, FrameTypeError for a
    non-int."""
    length = _int(length, "stream length")
    if length < 0:
        raise FrameError(f"stream length {length} is negative")
    return max(1, -(-length // payload_bytes(frame_bytes)))


def encrypt_frame(aead, nonce, payload, frame_bytes):
    """One frame: IV block ‖ AES-GCM(payload zero-padded to the frame's payload size)."""
    size = payload_bytes(frame_bytes)
    payload = _bytes(payload, "a frame payload")
    nonce = _bytes(nonce, "a nonce")
    if len(payload) > size:
        raise FrameError(f"{len(payload)} payload bytes do not fit a {frame_bytes}-byte frame")
    ct = aead.encrypt(nonce, bytes(payload).ljust(size, b"\0"), None)
    return iv_block(nonce) + ct


def decrypt_frame(aead, frame):
    """(nonce, payload) of a frame; cryptography's InvalidTag if it does not authenticate,
    FrameError if its size is not a frame size or its IV block does not end in
    00 00 00 01, FrameTypeError if it is not bytes."""
    frame = _bytes(frame, "a frame")
    check_frame_bytes(len(frame))
    if frame[NONCE_BYTES:IV_BYTES] != J0_TAIL:
        raise FrameError("IV block does not end in 00 00 00 01")
    nonce = bytes(frame[:NONCE_BYTES])
    return nonce, aead.decrypt(nonce, bytes(frame[IV_BYTES:]), None)


def encrypt_stream(key, nonces, data, frame_bytes):
    """The frames of *data* (bytes), frame *i* under ``nonces(i)``, as one bytes object."""
    aead = AESGCM(key)
    size = payload_bytes(frame_bytes)
    data = _bytes(data, "stream data")     # (cryptography takes bytes slices faster than memoryviews)
    n = frame_count(len(data), frame_bytes)
    out = []
    for i in range(n):
        nonce = nonces(i)
        chunk = data[i * size:(i + 1) * size]
        if len(chunk) < size:              # only the last frame is padded
            chunk = chunk.ljust(size, b"\0")
        if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
            iv_block(nonce)                 # raises the error that says what is wrong
        out += (nonce + J0_TAIL, aead.encrypt(nonce, chunk, None))
    return b"".join(out)


def decrypt_stream(key, nonces, blob, length, frame_bytes):
    """Inverse of :func:`encrypt_stream`: the *length* bytes of the stream in *blob*.

    *blob* must be exactly the :func:`frame_count` (*length*, *frame_bytes*) frames of the
    stream: FrameError for a blob that is shorter (a frame dropped, or empty), longer, or
    not a whole number of frames, so a truncated stream is never returned as a short one.
    FrameError also for a frame whose nonce is not ``nonces(i)`` or whose IV block is
    malformed; InvalidTag for a frame that does not authenticate; FrameTypeError for a
    blob that is not bytes or a non-int length."""
    blob = _bytes(blob, "a stream blob")
    n = frame_count(length, frame_bytes)
    if len(blob) != n * frame_bytes:
        raise FrameError(f"a {length}-byte stream is {n} frames of {frame_bytes} bytes "
                         f"({n * frame_bytes} bytes), the blob has {len(blob)} bytes "
                         f"({len(blob) / frame_bytes:g} frames)")
    aead = AESGCM(key)
    out = []
    for i in range(n):
        nonce, payload = decrypt_frame(aead, blob[i * frame_bytes:(i + 1) * frame_bytes])
        if nonce != nonces(i):
            raise FrameError(f"frame {i}: nonce {nonce.hex()} is not {nonces(i).hex()}")
        out.append(payload)
    return b"".join(out)[:length]

