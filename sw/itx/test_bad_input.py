"""Property tests: the ITX frames codec, the tile's completion input, host memory and the
runtime's restore of a saved checkpoint take random and mutated input and raise only their
documented errors (FrameError / InvalidTag, PacketError, HostError), never IndexError,
AttributeError, KeyError, OverflowError or a bare ValueError/TypeError; a stream that is
truncated, extended or altered is never returned as a stream, and a saved checkpoint of
the wrong size never reaches the ring.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import dataclasses

import pytest
from cryptography.exceptions import InvalidTag
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hw.sxp.packet import Kind
from sw.itx.frames import (
    CHECKPOINT_NONCE,
    STREAM_NONCE,
    FrameError,
    FrameTypeError,
    StreamType,
    checkpoint_nonce,
    decrypt_stream,
    encrypt_stream,
    frame_count,
    iv_block,
    nonce_type,
    stream_nonce,
)
from sw.itx.host import HostError, HostMemory, HostTypeError
from sw.itx.runtime import Runtime
from sw.itx.tile import PacketError, PacketTypeError, Read, Tile
from sw.pcie.beats import HEADER_FIELDS, Beat, header

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
SIZES = [128 * n for n in range(1, 9)]
KEY = bytes(range(32))
NOT_BYTES = st.one_of(st.none(), st.integers(), st.text(max_size=12), st.lists(st.integers(0, 255), max_size=12))
NOT_INTS = st.one_of(st.none(), st.floats(), st.text(max_size=3), st.binary(max_size=3), st.booleans())
LAYOUTS = [STREAM_NONCE[StreamType.CODE], STREAM_NONCE[StreamType.DATA], CHECKPOINT_NONCE]


def _nonces(i):
    return stream_nonce(StreamType.DATA, 5, i)


# ---- frames --------------------------------------------------------------------------------
def test_audit_cases_frames():
    """The inputs the audit found mishandled: a 3,000-byte stream with its last frame
    dropped came back as 2,880 bytes, an empty blob as b"", an empty nonce gave IndexError."""
    data = bytes(range(256)) * 11 + bytes(184)                  # 3000 bytes
    blob = encrypt_stream(KEY, _nonces, data, 512)              # 7 frames of 480 payload bytes
    assert len(blob) == 7 * 512 and decrypt_stream(KEY, _nonces, blob, 3000, 512) == data
    with pytest.raises(FrameError, match="7 frames of 512 bytes .* blob has 3072 bytes"):
        decrypt_stream(KEY, _nonces, blob[:-512], 3000, 512)      # was 2,880 bytes, no error
    with pytest.raises(FrameError, match="blob has 0 bytes"):
        decrypt_stream(KEY, _nonces, b"", 3000, 512)
    with pytest.raises(FrameError, match="12 bytes, not 0"):
        nonce_type(b"")
    with pytest.raises(FrameTypeError):
        nonce_type(None)
    with pytest.raises(FrameError, match="negative"):
        frame_count(-1, 128)


@SETTINGS
@given(st.one_of(st.binary(max_size=20), NOT_BYTES))
def test_nonce_parsers_raise_only_frame_errors(nonce):
    """A nonce of any length or type: a StreamType or FrameError, and every layout's decode
    agrees with nonce_type on which layout it is."""
    try:
        kind = nonce_type(nonce)
    except FrameError:
        kind = None
    else:
        assert isinstance(nonce, bytes) and len(nonce) == 12 and nonce[0] == kind
    for layout in LAYOUTS:
        try:
            fields = layout.decode(nonce)
        except FrameError:
            continue
        assert kind is layout.type and layout.encode(**{k: v for k, v in fields.items() if k != "type"}) == nonce
    try:
        assert iv_block(nonce) == bytes(nonce) + b"\0\0\0\1"
    except FrameError:
        assert not isinstance(nonce, bytes) or len(nonce) != 12


@SETTINGS
@given(st.lists(st.one_of(st.integers(-3, 1 << 60), NOT_INTS), min_size=5, max_size=5))
def test_nonce_builders_raise_only_frame_errors(values):
    for build in (lambda: stream_nonce(StreamType.CODE, values[0], values[1]),
                  lambda: stream_nonce(values[2], values[0], values[1]),
                  lambda: checkpoint_nonce(*values)):
        try:
            nonce = build()
        except FrameError:
            continue
        assert isinstance(nonce, bytes) and len(nonce) == 12


@SETTINGS
@given(st.one_of(st.integers(-2, 10_000), NOT_INTS), st.one_of(st.sampled_from(SIZES), st.integers(-1, 2048), NOT_INTS))
def test_frame_count_raises_only_frame_errors(length, frame_bytes):
    try:
        n = frame_count(length, frame_bytes)
    except FrameError:
        assert not (type(length) is int and length >= 0 and frame_bytes in SIZES and type(frame_bytes) is int)
        return
    assert n >= 1 and (n - 1) * (frame_bytes - 32) < max(length, 1) <= n * (frame_bytes - 32)


@st.composite
def streams(draw):
    """(data, frame_bytes, blob) of a valid stream."""
    frame_bytes = draw(st.sampled_from(SIZES), label="frame_bytes")
    data = draw(st.binary(max_size=2500), label="data")
    return data, frame_bytes, encrypt_stream(KEY, _nonces, data, frame_bytes)


MUTATIONS = ("drop last frame", "truncate", "extend", "extend by frames", "flip", "swap frames", "empty")


@SETTINGS
@given(streams(), st.sampled_from(MUTATIONS), st.data())
def test_decrypt_stream_never_returns_a_mutated_stream(stream, mutation, draw):
    """Every mutation of a valid blob raises FrameError or InvalidTag; the blob itself
    decrypts to its data."""
    data, frame_bytes, blob = stream
    assert decrypt_stream(KEY, _nonces, blob, len(data), frame_bytes) == data
    n = len(blob) // frame_bytes
    if mutation == "drop last frame":
        bad = blob[:-frame_bytes]
    elif mutation == "truncate":
        bad = blob[:draw.draw(st.integers(0, len(blob) - 1), label="cut")]
    elif mutation == "extend":
        bad = blob + draw.draw(st.binary(min_size=1, max_size=frame_bytes + 1), label="tail")
    elif mutation == "extend by frames":        # a valid frame of the next index: still too long
        bad = blob + encrypt_stream(KEY, lambda i: _nonces(n + i), b"x", frame_bytes)
    elif mutation == "flip":
        bit = draw.draw(st.integers(0, 8 * len(blob) - 1), label="bit")
        bad = bytearray(blob)
        bad[bit // 8] ^= 1 << bit % 8
    elif mutation == "swap frames":
        if n < 2:
            return
        bad = blob[frame_bytes:2 * frame_bytes] + blob[:frame_bytes] + blob[2 * frame_bytes:]
    else:
        bad = b""
    with pytest.raises((FrameError, InvalidTag)):
        decrypt_stream(KEY, _nonces, bytes(bad), len(data), frame_bytes)


@SETTINGS
@given(streams(), st.one_of(st.integers(-5, 5000), NOT_INTS), st.one_of(NOT_BYTES, st.binary(max_size=300)))
def test_decrypt_stream_bad_arguments(stream, length, blob):
    """A wrong length or a blob that is not a stream: only FrameError or InvalidTag; any
    stream returned has exactly *length* bytes."""
    data, frame_bytes, good = stream
    for args in ((good, length), (blob, len(data)), (blob, length)):
        try:
            got = decrypt_stream(KEY, _nonces, *args, frame_bytes)
        except (FrameError, InvalidTag):
            continue
        assert len(got) == args[1] and got == data[:args[1]] + bytes(max(0, args[1] - len(data)))


# ---- tile completions ---------------------------------------------------------------------
def _waiting_tile(lanes):
    tile = Tile(3, lanes=lanes)
    tile.run(a for a in [Read(0x1000_0000, 128, 0, aes=0)])
    tile.outbox.clear()
    return tile


@st.composite
def header_dicts(draw, flaw):
    """A header dict for a completion of the tile's read (or another), with *flaw*."""
    if flaw == "not a dict":
        return draw(st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=3)))
    hdr = header(kind=draw(st.sampled_from([2, 2, 2, 0, 1, 3])), tile=draw(st.sampled_from([3, 3, 4])),
                 addr=draw(st.sampled_from([0x1000_0000, 0x1000_0000, 0x1000_0040, 0x0FFF_FFF0])),
                 length=draw(st.sampled_from([128, 64, 16, 0, 2047])), cc=draw(st.integers(0, 1)))
    name = draw(st.sampled_from(HEADER_FIELDS))
    if flaw == "missing field":
        del hdr[name]
    elif flaw == "extra field":
        hdr["bogus"] = 0
    elif flaw == "wide field":
        hdr[name] = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 32)))
    elif flaw == "junk field":
        hdr[name] = draw(NOT_INTS.filter(lambda v: not isinstance(v, bool)))
    return hdr


FLAWS = ("not a dict", "missing field", "extra field", "wide field", "junk field", "negative data",
         "wide data", "junk data", "empty", "not beats", "not a list")


@st.composite
def packets(draw, beat_bytes):
    """(flaw, packet): half well-formed packets of 1..8 beats (flaw "none"), half with one
    flaw of :data:`FLAWS`."""
    flaw = draw(st.sampled_from(("none",) * len(FLAWS) + FLAWS), label="flaw")
    if flaw == "empty":
        return flaw, []
    if flaw == "not a list":
        return flaw, draw(st.one_of(st.none(), st.integers(), st.binary(max_size=4)))
    if flaw == "not beats":
        return flaw, draw(st.lists(st.one_of(st.integers(), st.none()), min_size=1, max_size=3))
    n = draw(st.integers(1, 8))
    bad_beat = draw(st.integers(0, n - 1)) if flaw.endswith(" data") else None
    hdr = draw(header_dicts(flaw))
    beats = []
    for k in range(n):
        data = draw(st.integers(0, (1 << 8 * beat_bytes) - 1))
        if k == bad_beat:
            data = draw({"negative data": st.integers(max_value=-1),
                         "wide data": st.integers(min_value=1 << 8 * beat_bytes),
                         "junk data": NOT_INTS}[flaw])
        beats.append(Beat(data, hdr if k == 0 else dict(header()), int(k == 0), int(k == n - 1)))
    return flaw, beats


@pytest.mark.parametrize("lanes", [1, 4])
@settings(SETTINGS, max_examples=100)
@given(st.data())
def test_tile_deliver_raises_only_packet_errors(lanes, draw):
    """A packet with a flaw raises PacketError and leaves the tile as it was; a well-formed
    one is staged, or halts the tile (PROTOCOL) if it does not continue the read."""
    tile = _waiting_tile(lanes)
    flaw, packet = draw.draw(packets(16 * lanes), label="packet")
    try:
        done = tile.deliver(packet)
    except PacketError:
        assert flaw != "none", "a well-formed packet refused"
        assert tile.exception is None and tile.busy and tile._got == 0, "a refused packet changed the tile"
        return
    assert flaw == "none", f"a packet with flaw {flaw!r} accepted"
    assert isinstance(done, bool)
    assert tile.exception is not None or tile._got > 0 or packet[0].hdr["length"] == 0


def test_audit_case_tile():
    tile = _waiting_tile(1)
    with pytest.raises(PacketError, match="empty packet"):
        tile.deliver([])
    with pytest.raises(PacketTypeError):
        tile.deliver(None)
    assert tile.exception is None and tile.busy


# ---- host memory ----------------------------------------------------------------------------
WINDOW, SIZE = 0x1000_0000, 1 << 16


def _host():
    return HostMemory(window=WINDOW, size=SIZE, rng=__import__("random").Random(0))


def test_audit_cases_host():
    host = _host()
    with pytest.raises(HostError, match="negative"):
        host.read(WINDOW + 64, -16)
    with pytest.raises(HostTypeError):
        host.read(WINDOW + 0.5, 16)
    with pytest.raises(HostTypeError):
        host.write(WINDOW, "text")
    with pytest.raises(HostError, match="alignment"):
        host.alloc(16, align=0)
    with pytest.raises(HostError, match="live allocation"):
        host.free(WINDOW)
    with pytest.raises(HostError, match="empty packet"):
        host.request([])


ADDRS = st.one_of(st.integers(WINDOW - 32, WINDOW + SIZE + 32), st.integers(-1, 1 << 33), NOT_INTS)


@SETTINGS
@given(ADDRS, st.one_of(st.integers(-20, 300), NOT_INTS), st.one_of(st.binary(max_size=64), NOT_BYTES))
def test_host_storage_raises_only_host_errors(addr, length, data):
    host = _host()
    try:
        host.write(addr, data)
    except HostError:
        pass
    else:
        assert host.read(addr, len(data)) == data
    try:
        got = host.read(addr, length)
    except HostError:
        assert not (type(addr) is int and type(length) is int and 0 <= length
                    and WINDOW <= addr and addr + length <= WINDOW + SIZE)
    else:
        assert len(got) == length


@SETTINGS
@given(st.data())
def test_host_request_raises_only_host_errors(draw):
    """A request with a flaw, of another kind, or a write whose beats carry fewer bytes than
    its length raises HostError and leaves no trace; a well-formed read or write request
    inside the ring is served."""
    host = _host()
    flaw, packet = draw.draw(packets(16), label="packet")
    in_ring = False
    if flaw == "none":
        # aim some at the ring: a read or write request of a plausible size inside it
        in_ring = draw.draw(st.booleans(), label="in ring")
        if in_ring:
            packet[0].hdr.update(kind=draw.draw(st.sampled_from([Kind.READ_REQ.value, Kind.WRITE_REQ.value, 3])),
                                 addr=WINDOW + draw.draw(st.integers(0, 8), label="at") * 16,
                                 length=draw.draw(st.sampled_from([16 * len(packet), 64, 1024]), label="length"))
    hdr = packet[0].hdr if flaw == "none" else None
    short_write = hdr is not None and hdr["kind"] == Kind.WRITE_REQ.value and hdr["length"] > 16 * len(packet)
    try:
        host.request(packet, 0)
    except HostError:
        assert not host.reads and not host.writes and not host.outstanding, "a refused request left a trace"
        assert not in_ring or hdr["kind"] == 3 or short_write, f"a good request refused: {hdr}"
        return
    assert flaw == "none" and not short_write, f"a request with flaw {flaw!r} accepted (short write: {short_write})"
    kind = packet[0].hdr["kind"]
    assert (kind == Kind.READ_REQ.value and host.outstanding) or (kind == Kind.WRITE_REQ.value and host.writes)


# ---- saved checkpoints ------------------------------------------------------------------------
def _saved(tiles=(0, 3), length=2048, frame_bytes=512, seed=0):
    """A checkpoint saved from a runtime whose slots hold random bytes (what tiles wrote)."""
    rng = __import__("random").Random(seed)
    rt = Runtime(HostMemory(), region_bytes=1 << 20)
    plan = rt.checkpoint_slots(tiles, length, ctx=1, frame_bytes=frame_bytes)
    for slot in plan.slots.values():
        rt.host.write(slot.addr, rng.randbytes(-(-length // (frame_bytes - 32)) * frame_bytes))
    return rt.save(plan, epoch=1, checkpoint=0)


def test_audit_case_restore():
    """A saved checkpoint with its last frame cut off was written short into the ring and
    failed only later, in the tile."""
    saved = _saved()
    cut = dataclasses.replace(saved, blobs={**saved.blobs, 3: saved.blobs[3][:-512]})
    rt = Runtime(HostMemory(), region_bytes=1 << 20)
    with pytest.raises(FrameError, match="tile 3's saved checkpoint is 2048 bytes, not the 2560"):
        rt.restore(cut, ctx=2)
    with pytest.raises(FrameTypeError, match="is a NoneType"):
        rt.restore(dataclasses.replace(saved, blobs={0: None, 3: saved.blobs[3]}), ctx=2)
    assert rt.regions == {}, "a refused restore allocated a region"


@SETTINGS
@given(st.sampled_from(SIZES), st.integers(1, 3000), st.sampled_from(("cut", "extend", "junk", "none")), st.data())
def test_restore_refuses_a_blob_of_another_size(frame_bytes, length, how, draw):
    """One tile's blob cut, extended or replaced by junk: FrameError before anything is
    allocated or written; the blobs as saved go into the ring unchanged."""
    saved = _saved(length=length, frame_bytes=frame_bytes, seed=length)
    good = saved.blobs[3]
    if how == "cut":
        bad = good[:draw.draw(st.integers(0, len(good) - 1), label="cut")]
    elif how == "extend":
        bad = good + draw.draw(st.binary(min_size=1, max_size=frame_bytes + 1), label="tail")
    elif how == "junk":
        bad = draw.draw(NOT_BYTES, label="junk")
    else:
        bad = good
    rt = Runtime(HostMemory(), region_bytes=1 << 20)
    flawed = dataclasses.replace(saved, blobs={**saved.blobs, 3: bad})
    if how == "none":
        plan = rt.restore(flawed, ctx=2)
        for t, slot in plan.slots.items():
            assert rt.host.read(slot.addr, len(saved.blobs[t])) == saved.blobs[t]
        return
    with pytest.raises(FrameError):
        rt.restore(flawed, ctx=2)
    assert rt.regions == {}, "a refused restore allocated a region"
