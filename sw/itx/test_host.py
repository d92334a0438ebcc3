"""Host memory: sparse ring, allocator, completions split at the RCB, latency, interleaving."""
import random

import pytest

from hw.sxp.packet import Kind
from sw.itx.host import DEFAULT_WINDOW, RING_BYTES, HostMemory
from sw.pcie.beats import Beat, header
from sw.pcie.host import is_legal_split


def _read(host, addr, length, tag, now=0):
    host.request([Beat(0, header(kind=Kind.READ_REQ, addr=addr, length=length, tag=tag), 1, 1)],
                 now)


def _drain(host, until=10_000):
    out = []
    for now in range(until):
        p = host.completion(now)
        if p is not None:
            out.append((now, p))
        if not host.outstanding:
            break
    return out


def test_sparse_storage_and_window():
    h = HostMemory()
    assert h.read(DEFAULT_WINDOW + RING_BYTES - 16, 16) == bytes(16)
    h.write(DEFAULT_WINDOW + 4090, b"0123456789")            # crosses a page
    assert h.read(DEFAULT_WINDOW + 4090, 10) == b"0123456789"
    assert len(h.pages) == 2
    assert h.contains(b"5678") and not h.contains(b"5679")
    for bad in (DEFAULT_WINDOW - 16, DEFAULT_WINDOW + RING_BYTES - 8):
        with pytest.raises(ValueError):
            h.read(bad, 16)
    with pytest.raises(ValueError):
        HostMemory(window=0xF000_0000, size=RING_BYTES * 2)


def test_ring_allocator_wraps_and_never_overlaps():
    h = HostMemory(size=64 * 4096)
    a = h.alloc(40 * 4096)
    b = h.alloc(20 * 4096)
    assert b == a + 40 * 4096
    with pytest.raises(MemoryError):
        h.alloc(8 * 4096)            # 4 pages left at the end, none at the start
    h.free(a)
    c = h.alloc(8 * 4096)            # wraps to the start
    assert c == DEFAULT_WINDOW


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("seed", range(5))
def test_completions_split_at_rcb_in_order_with_data(seed, lanes):
    """Reads on beats of 16·lanes bytes are answered by legal RCB splits whose every
    completion is whole beats, first/last flags right, the data in lane order."""
    rng = random.Random(seed)
    h = HostMemory(rng=rng, latency=(5, 30), lanes=lanes)
    bb = 16 * lanes
    expected = {}
    for tag in range(8):
        addr = DEFAULT_WINDOW + rng.randrange(0, 1 << 16) * bb
        length = rng.randrange(1, 1024 // bb + 1) * bb
        data = rng.randbytes(length)
        h.write(addr, data)
        expected[tag] = (addr, length, data)
        _read(h, addr, length, tag, now=0)
    got = {t: [] for t in expected}
    order = []
    for now, packet in _drain(h):
        hdr = packet[0].hdr
        assert now >= 5, "no completion before the minimum latency"
        assert hdr["kind"] == Kind.READ_CPL.value
        assert [b.first for b in packet] == [1] + [0] * (len(packet) - 1)
        assert [b.last for b in packet] == [0] * (len(packet) - 1) + [1]
        assert hdr["addr"] % bb == 0 and hdr["length"] % bb == 0, "a completion off the beat"
        assert len(packet) == hdr["length"] // bb
        got[hdr["tag"]].append((hdr["addr"], hdr["length"],
                                b"".join(b.data.to_bytes(bb, "little") for b in packet)))
        order.append(hdr["tag"])
    for tag, (addr, length, data) in expected.items():
        split = [(a, n) for a, n, _ in got[tag]]
        assert is_legal_split(addr, length, split), f"tag {tag}: split {split} breaks the RCB rules"
        assert b"".join(d for _, _, d in got[tag]) == data
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches > len(expected), "completions of different reads interleave"


@pytest.mark.parametrize("lanes", [1, 4])
def test_writes_are_stored_and_logged(lanes):
    h = HostMemory(lanes=lanes)
    bb = 16 * lanes
    payload = bytes(range(3 * bb))
    beats = [Beat(int.from_bytes(payload[k:k + bb], "little"),
                  header(kind=Kind.WRITE_REQ, addr=DEFAULT_WINDOW + 256, length=3 * bb, aes=1),
                  int(k == 0), int(k == 2 * bb)) for k in (0, bb, 2 * bb)]
    h.request(beats)
    assert h.read(DEFAULT_WINDOW + 256, 3 * bb) == payload
    assert h.writes[0][0] == DEFAULT_WINDOW + 256 and h.writes[0][1] == payload


def test_lanes_and_completion_boundary_checked():
    for bad in (3, 8, True):
        with pytest.raises(ValueError):
            HostMemory(lanes=bad)
    with pytest.raises(ValueError):
        HostMemory(lanes=4, rcb=32)      # a completion could end mid-beat
    assert HostMemory(lanes=4).beat_bytes == 64


def test_read_hook_lies():
    h = HostMemory(latency=(0, 0), split="coarsest")
    h.write(DEFAULT_WINDOW, bytes(64))
    h.read_hook = lambda addr, length, data: b"\xff" * length
    _read(h, DEFAULT_WINDOW, 64, 3)
    (_, packet), = _drain(h)
    assert packet[0].data == (1 << 128) - 1
