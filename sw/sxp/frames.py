"""Frame helpers shared by the model tests, the cocotb regression and the benchmark.

A frame (docs/sxp.md) is 128·n bytes, at most 1 KiB: the IV block (12-byte nonce ‖
``00 00 00 01``), the data blocks, and the 16-byte tag slot. Blocks are ints in bus lane
order (``int.from_bytes(b, "little")``).

At ``lanes`` = L a beat carries L consecutive blocks of a packet, block *k* in bits
128k+127..128k (:func:`beats_of` / :func:`blocks_of_beats`); packets are then whole beats
(:func:`split_sizes` with ``step`` = 16·L).
"""
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.sxp.packet import BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES

__all__ = ["iv_block", "blocks_of", "bytes_of", "write_frame", "sealed_frame", "open_frame",
           "split_sizes", "beats_of", "blocks_of_beats", "framing_case", "FRAMING_CASES",
           "IV_BEAT", "FRAME_SIZES"]

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


def split_sizes(total_bytes, rng, max_bytes=MAX_PAYLOAD_BYTES, step=BEAT_BYTES):
    """Random packet sizes (multiples of *step* from *step* to *max_bytes*) that add up to
    *total_bytes* (a multiple of *step*)."""
    if total_bytes % step or max_bytes < step:
        raise ValueError(f"{total_bytes} bytes do not split into packets of {step}..{max_bytes}")
    sizes, left = [], total_bytes
    while left:
        s = min(left, step * rng.randint(1, max_bytes // step))
        sizes.append(s)
        left -= s
    return sizes


def beats_of(blocks, lanes):
    """Blocks (ints) packed into beats of *lanes* blocks, block *k* of a beat in bits
    128k+127..128k (the lane order of ``beat_layout(lanes)``)."""
    if len(blocks) % lanes:
        raise ValueError(f"{len(blocks)} blocks do not fill beats of {lanes} lanes")
    bits = 8 * BEAT_BYTES
    return [sum(b << bits * k for k, b in enumerate(blocks[i:i + lanes]))
            for i in range(0, len(blocks), lanes)]


def blocks_of_beats(beats, lanes):
    """The blocks of beats of *lanes* lanes, in byte order (inverse of :func:`beats_of`)."""
    bits = 8 * BEAT_BYTES
    return [(v >> bits * k) & ((1 << bits) - 1) for v in beats for k in range(lanes)]


FRAMING_CASES = ["more_in_frame", "more_cc", "fewer_cc", "fewer_opening", "clear_more",
                 "clear_fewer"]
IV_BEAT = "iv"      # expected beat: the frame's opening beat (lane 0 the IV block in clear)


def framing_case(case, frame, lanes, rng):
    """A malformed-framing case (docs/sxp.md "Malformed framing") on a 256-byte frame given
    as its beats (*frame*, 16 / *lanes* of them): ``(packets, want)`` with *packets*
    ``[(length in beats, beats given, aes, cc)]`` (the first packet is the bad one) and
    *want* the beats that must leave (``None``: not checked by the case, the model
    comparison checks it; :data:`IV_BEAT`: the opening beat, whose lane 0 is the IV)."""
    nb, X = len(frame), None
    g = nb // 2 + 1                         # fewer_cc: beats given of nb
    junk = [rng.getrandbits(8 * BEAT_BYTES * lanes) for _ in range(3)]
    return {
        # 2 beats declared, 4 given: the frame dies there and the rest of it errs
        "more_in_frame": ([(2, frame[:4], 1, 0), (nb - 2, frame[2:], 1, 1)],
                          [IV_BEAT] + [0] * (nb - 1)),
        "more_cc": ([(nb, frame + junk[:2], 1, 1)], [IV_BEAT] + [X] * (nb - 2) + [0]),
        "fewer_cc": ([(nb, frame[:g], 1, 1)], [IV_BEAT] + [X] * (g - 2) + [0] * (nb - g + 1)),
        "fewer_opening": ([(4, frame[:1], 1, 1)], [0] * 4),
        "clear_more": ([(2, junk, 0, 0)], [junk[0], 0]),
        "clear_fewer": ([(3, junk[:1], 0, 0)], [0] * 3),
    }[case]
