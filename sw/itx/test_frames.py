"""Frames and nonces against cryptography's AESGCM (an independent reference)."""
import itertools
import random

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sw.itx.frames import (
    CHECKPOINT_NONCE,
    STREAM_NONCE,
    FrameError,
    NonceLayout,
    StreamType,
    checkpoint_nonce,
    decrypt_frame,
    decrypt_stream,
    encrypt_stream,
    frame_count,
    iv_block,
    nonce_type,
    payload_bytes,
    stream_nonce,
)
from sw.itx.host import HostMemory
from sw.itx.runtime import Runtime

SIZES = [128 * n for n in range(1, 9)]
LAYOUTS = [STREAM_NONCE[StreamType.CODE], STREAM_NONCE[StreamType.DATA], CHECKPOINT_NONCE]


@pytest.mark.parametrize("frame_bytes", SIZES)
def test_frames_decrypt_with_aesgcm(frame_bytes):
    rng = random.Random(frame_bytes)
    key = rng.randbytes(32)
    data = rng.randbytes(rng.randrange(1, 5000))
    blob = encrypt_stream(key, lambda i: stream_nonce(StreamType.DATA, 7, i), data, frame_bytes)
    n = frame_count(len(data), frame_bytes)
    assert len(blob) == n * frame_bytes, "every frame has the declared size"
    size = payload_bytes(frame_bytes)
    assert size == frame_bytes - 32
    got = b""
    for i in range(n):
        frame = blob[i * frame_bytes:(i + 1) * frame_bytes]
        nonce = stream_nonce(StreamType.DATA, 7, i)
        assert frame[:16] == nonce + b"\0\0\0\1", f"frame {i}: IV block is nonce ‖ 00000001"
        got += AESGCM(key).decrypt(nonce, frame[16:], None)   # raises if the tag is wrong
    assert got[:len(data)] == data and got[len(data):] == bytes(len(got) - len(data)), \
        "payload then zero padding"
    assert decrypt_stream(key, lambda i: stream_nonce(StreamType.DATA, 7, i), blob, len(data),
                          frame_bytes) == data


def test_bad_frame_sizes_refused():
    for bad in (0, 64, 100, 1152, 2048, -128):
        with pytest.raises(FrameError):
            payload_bytes(bad)
    with pytest.raises(TypeError):
        payload_bytes(256.0)
    with pytest.raises(TypeError):
        payload_bytes(True)
    with pytest.raises(FrameError):
        encrypt_stream(bytes(32), lambda i: stream_nonce(StreamType.CODE, 0, i), b"x", 96)


def test_tampered_frame_fails():
    key = bytes(range(32))
    frame = encrypt_stream(key, lambda i: stream_nonce(StreamType.CODE, 1, i), b"a" * 96, 128)
    for bit in (0, 8 * 12, 8 * 20 + 3, 8 * 127 + 7):    # nonce, IV tail, ciphertext, tag
        bad = bytearray(frame)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises((InvalidTag, FrameError)):
            decrypt_frame(AESGCM(key), bytes(bad))


def test_nonce_layout_roundtrip_and_ranges():
    rng = random.Random(1)
    for layout in LAYOUTS:
        for _ in range(500):
            fields = {n: rng.randrange(1 << b) for n, b in layout.fields if n != "type"}
            nonce = layout.encode(**fields)
            assert len(nonce) == 12 and nonce[0] == layout.type
            assert nonce_type(nonce) is layout.type
            assert layout.decode(nonce) == dict(fields, type=layout.type)
            for other in LAYOUTS:
                if other.type != layout.type:
                    with pytest.raises(FrameError):
                        other.decode(nonce)    # a nonce names its layout: no cross-type reading
        for name, bits in layout.fields[1:]:
            fields = {n: 0 for n, _ in layout.fields[1:]}
            with pytest.raises(FrameError):
                layout.encode(**dict(fields, **{name: 1 << bits}))   # never wraps
            with pytest.raises(FrameError):
                layout.encode(**dict(fields, **{name: -1}))
    with pytest.raises(FrameError):
        stream_nonce(StreamType.CHECKPOINT, 0, 0)
    with pytest.raises(FrameError):
        nonce_type(bytes(12))          # type 0 is never used
    with pytest.raises(ValueError):
        NonceLayout(StreamType.CODE, [("type", 8), ("x", 80)])


def test_layouts_cannot_collide_between_types():
    """Distinct (type, fields) tuples give distinct nonces, over every layout at once:
    small field ranges make a collision likely if two tuples shared bits."""
    seen = {}
    small = lambda b: range(min(3, 1 << b))   # noqa: E731
    for layout in LAYOUTS:
        names = [n for n, _ in layout.fields[1:]]
        for values in itertools.product(*(small(b) for _, b in layout.fields[1:])):
            fields = dict(zip(names, values))
            nonce = layout.encode(**fields)
            key = (layout.type, tuple(values))
            assert seen.setdefault(nonce, key) == key, f"{key} and {seen[nonce]} share {nonce.hex()}"
    # and single-bit fields: each field's top and bottom bit land on different nonce bits
    for layout in LAYOUTS:
        bits = set()
        for name, width in layout.fields[1:]:
            for b in (0, width - 1):
                zero = {n: 0 for n, _ in layout.fields[1:]}
                word = int.from_bytes(layout.encode(**dict(zero, **{name: 1 << b})), "big")
                word ^= int.from_bytes(layout.encode(**zero), "big")
                assert bin(word).count("1") == 1 and word not in bits
                bits.add(word)


def _application(seed):
    """A random application: code streams for each tile under one party's key, data streams
    under two parties' keys, checkpoints of several epochs/ids/IPUs/tiles."""
    rng = random.Random(seed)
    rt = Runtime(HostMemory(rng=rng), region_bytes=1 << 20)
    keys = [rng.randbytes(32) for _ in range(3)]
    tiles = rng.sample(range(1472), rng.randrange(2, 9))
    rt.code_stream({t: rng.randbytes(rng.randrange(1, 4000)) for t in tiles}, key=keys[0],
                   frame_bytes=rng.choice(SIZES))
    for k in range(rng.randrange(1, 6)):
        rt.data_stream(rng.randbytes(rng.randrange(1, 6000)), key=keys[1 + k % 2],
                       readers=tiles, ctx=1 + k % 2, frame_bytes=rng.choice(SIZES))
    return rt, keys, tiles, rng


@pytest.mark.parametrize("seed", range(6))
def test_no_nonce_repeats_under_one_key(seed):
    """Every frame the runtime put in host memory, grouped by key: each nonce once, and it
    opens under its key with AESGCM."""
    rt, keys, tiles, rng = _application(seed)
    used = {}
    for s in rt.streams:
        key = rt.keys[s.key_id]
        blob = rt.host.read(s.addr, s.size)
        for i in range(s.frames):
            frame = blob[i * s.frame_bytes:(i + 1) * s.frame_bytes]
            nonce = frame[:12]
            AESGCM(key).decrypt(nonce, frame[16:], None)
            assert nonce not in used.setdefault(key, set()), \
                f"nonce {nonce.hex()} repeats under one key (stream {s.type.name} {s.id})"
            used[key].add(nonce)
    # checkpoints: key per epoch; within an epoch the tiles write (checkpoint, ipu, tile, frame)
    for epoch in range(1, 4):
        ckpt = set()
        for cid in range(rng.randrange(1, 4)):
            for ipu in range(2):
                for t in tiles:
                    for i in range(rng.randrange(1, 5)):
                        n = checkpoint_nonce(epoch, cid, ipu, t, i)
                        assert n not in ckpt
                        ckpt.add(n)
        # and no checkpoint nonce equals a stream nonce (were a key ever shared)
        assert not ckpt & set().union(*used.values())


def test_iv_block():
    assert iv_block(bytes(range(12))) == bytes(range(12)) + b"\0\0\0\1"
    with pytest.raises(FrameError):
        iv_block(bytes(11))
