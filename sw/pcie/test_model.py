"""Unit tests of the ``pcie_rdtable`` golden model and the host completion generator.

The splitter is checked against a brute-force enumeration of cut sets, the model against
hand-worked cases (each bad-completion cause, framing repair, timeout, reset) and against
an end-to-end reassembly of random reads (tile, key_index, aes, data, one ``cc``)."""
import itertools
import random

import pytest

from hw.pcie.layout import Cause, check_params
from hw.sxp.packet import Header, Kind, beat_layout
from sw.common.payload import pack
from sw.pcie import (
    AGE_EXPIRED,
    Beat,
    ModelError,
    RdTableModel,
    all_splits,
    completion_packets,
    count_splits,
    decode,
    encode,
    header,
    is_legal_split,
    random_split,
    timeout_bounds,
)
from sw.pcie.host import cut_points


# ---- parameters -----------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error", [
    ({"entries": 1}, ValueError), ({"entries": 257}, ValueError), ({"entries": 16.0}, TypeError),
    ({"entries": True}, TypeError), ({"rcb": 32}, ValueError), ({"rcb": "64"}, TypeError),
    ({"max_payload": 512}, ValueError), ({"max_payload": 64}, ValueError),
    ({"max_read": 2048}, ValueError), ({"max_read": 100}, ValueError), ({"lanes": 3}, ValueError),
])
def test_bad_parameters(kwargs, error):
    with pytest.raises(error):
        check_params(**kwargs)
    with pytest.raises(error):
        RdTableModel(**kwargs)


def test_rcb_must_be_whole_beats(monkeypatch):
    """Every PCIe RCB (64, 128) is a multiple of every beat (16, 32, 64 bytes); with a
    32-byte RCB allowed, the rule that the RCB be whole beats shows."""
    monkeypatch.setattr("hw.pcie.layout.RCB_CHOICES", (32, 64, 128))
    assert check_params(rcb=32, lanes=2).granule == 32
    with pytest.raises(ValueError, match="multiple of the beat"):
        check_params(rcb=32, lanes=4)


# ---- beat codec -----------------------------------------------------------------------
@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_beat_codec_matches_layout(lanes):
    rng = random.Random(lanes)
    for _ in range(200):
        hdr = {name: rng.getrandbits(f.width) for name, f in Header}
        b = Beat(rng.getrandbits(128 * lanes), hdr, rng.randrange(2), rng.randrange(2))
        hdr_int = pack(Header, **hdr)
        assert encode(b, lanes) == pack(beat_layout(lanes), data=b.data, hdr=hdr_int,
                                        first=b.first, last=b.last)
        assert decode(encode(b, lanes), lanes) == b


# ---- completion splitter --------------------------------------------------------------
def brute_force_splits(addr, length, rcb, mps):
    cuts = cut_points(addr, length, rcb)
    found = []
    for r in range(len(cuts) + 1):
        for chosen in itertools.combinations(cuts, r):
            edges = [addr, *chosen, addr + length]
            split = [(a, b - a) for a, b in zip(edges, edges[1:])]
            if all(size <= mps for _, size in split):
                found.append(split)
    return found


@pytest.mark.parametrize("rcb, mps", [(64, 256), (64, 128), (128, 128), (128, 256)])
def test_all_splits_equal_brute_force(rcb, mps):
    rng = random.Random(rcb + mps)
    cases = [(0, 16), (0, 1024), (48, 16), (48, 32), (240, 1024), (4080, 272)]
    cases += [(16 * rng.randrange(1 << 12), 16 * rng.randint(1, 40)) for _ in range(20)]
    for addr, length in cases:
        expected = brute_force_splits(addr, length, rcb, mps)
        got = list(all_splits(addr, length, rcb, mps))
        assert sorted(got) == sorted(expected), (addr, length)
        assert count_splits(addr, length, rcb, mps) == len(expected)
        assert all(is_legal_split(addr, length, s, rcb, mps) for s in got)


def test_is_legal_split_rejects():
    assert is_legal_split(0, 128, [(0, 64), (64, 64)])
    assert not is_legal_split(0, 128, [(0, 48), (48, 80)])          # cut off the RCB
    assert not is_legal_split(0, 512, [(0, 512)])                   # above max payload
    assert not is_legal_split(0, 128, [(0, 64), (80, 48)])          # gap
    assert not is_legal_split(0, 128, [(0, 64)])                    # short
    assert not is_legal_split(0, 128, [])


def test_random_split_legal_and_covers_every_split():
    rng = random.Random(5)
    for _ in range(3000):
        rcb, mps = rng.choice([(64, 256), (64, 128), (128, 128), (128, 256)])
        addr, length = 16 * rng.randrange(1 << 20), 16 * rng.randint(1, 64)
        for mode in ("uniform", "finest", "coarsest"):
            split = random_split(addr, length, rcb, mps, rng, mode)
            assert is_legal_split(addr, length, split, rcb, mps), (addr, length, split, mode)
        assert len(random_split(addr, length, rcb, mps, rng, "finest")) == \
            len(cut_points(addr, length, rcb)) + 1
    # every split of a small read is drawn, roughly uniformly
    addr, length = 16, 400
    splits = {tuple(s) for s in all_splits(addr, length)}
    seen = {}
    for _ in range(40 * len(splits)):
        s = tuple(random_split(addr, length, rng=rng))
        seen[s] = seen.get(s, 0) + 1
    assert set(seen) == splits
    assert min(seen.values()) > 10


def test_completion_packets_beats_and_junk():
    rng = random.Random(9)
    data = rng.randbytes(320)
    split = [(0x1000, 64), (0x1040, 256)]
    for lanes in (1, 2, 4):
        pkts = completion_packets(7, 0x1000, data, split, lanes=lanes, rng=rng, junk=True)
        assert [len(p) for p in pkts] == [-(-64 // (16 * lanes)), -(-256 // (16 * lanes))]
        for p, (a, size) in zip(pkts, split):
            assert p[0].hdr["addr"] == a and p[0].hdr["length"] == size and p[0].hdr["tag"] == 7
            assert [b.last for b in p] == [0] * (len(p) - 1) + [1]
            got = b"".join(b.data.to_bytes(16 * lanes, "little") for b in p)[:size]
            assert got == data[a - 0x1000:a - 0x1000 + size]


# ---- model: normal operation ----------------------------------------------------------
def run_read(model, rng, tile, key_index, aes, addr, length, mode="uniform", junk=True):
    """A request and all its completions, one after the other; returns (tag, beats out)."""
    tag = model.request(tile=tile, key_index=key_index, aes=aes, addr=addr, length=length,
                        xbctx=rng.randrange(16))
    data = rng.randbytes(length)
    split = random_split(addr, length, model.params.rcb, model.params.max_payload, rng, mode)
    out = []
    for pkt in completion_packets(tag, addr, data, split, model.params.lanes, rng, junk):
        out += model.send(pkt)
    return tag, data, out


def test_request_completion_roundtrip():
    rng = random.Random(1)
    m = RdTableModel(entries=16)
    tag, data, out = run_read(m, rng, tile=1471, key_index=9, aes=1, addr=0x2000_0030, length=1024)
    assert tag == 0 and m.outstanding == 0 and not m.errors
    assert m.req_out.popleft().hdr["tag"] == 0
    assert b"".join(b.data.to_bytes(16, "little") for b in out) == data
    assert [b.hdr["cc"] for b in out if b.last] == [0] * (sum(b.last for b in out) - 1) + [1]
    for b in out:
        assert (b.hdr["tile"], b.hdr["key_index"], b.hdr["aes"], b.hdr["kind"], b.hdr["xbctx"]) == \
            (1471, 9, 1, Kind.READ_CPL.value, 0)
    assert [t for _, t in m.finished] == [0]


def test_lowest_free_tag_and_reuse_right_after_free():
    m = RdTableModel(entries=4)
    tags = [m.request(tile=t, addr=0x100 * t, length=16) for t in range(4)]
    assert tags == [0, 1, 2, 3] and m.free_tags() == []
    with pytest.raises(ModelError):
        m.request(tile=9, addr=0, length=16)
    m.send([Beat(5, header(tag=2, addr=0x200, length=16), 1, 1)])
    assert m.free_tags() == [2]
    assert m.request(tile=9, addr=0x900, length=32) == 2
    out = m.send([Beat(6, header(tag=2, addr=0x900, length=32), 1, 0), Beat(7, header(), 0, 1)])
    assert [(b.hdr["tile"], b.hdr["cc"], b.data) for b in out] == [(9, 1, 6), (9, 1, 7)]


def test_same_cycle_request_and_completion_read_old_state():
    """A completion in the cycle its tag is allocated is unknown; a tag freed in a cycle is
    not allocated in that same cycle."""
    m = RdTableModel(entries=2)
    m.request(addr=0, length=16)
    tag = m.step(req=Beat(0, header(addr=0x40, length=16)), cpl=Beat(0, header(tag=1, addr=0x40, length=16)))
    assert tag == 1 and m.errors[-1][1:] == (1, Cause.UNKNOWN_TAG)
    # in the cycle after its allocation a tag is still unknown (its entry is being written);
    # from the cycle after that, it is checked against its read
    m.step(cpl=Beat(0, header(tag=1, addr=0x40, length=16)))
    assert m.errors[-1][1:] == (1, Cause.UNKNOWN_TAG) and len(m.errors) == 2
    m.step(cpl=Beat(0, header(tag=1, addr=0x40, length=16)))
    assert len(m.errors) == 2 and m.free_tags() == [1]
    assert m.request(addr=0x80, length=16) == 1
    # free tag 0 and request in the same cycle: the table is full before the edge
    with pytest.raises(ModelError):
        m.step(req=Beat(0, header(addr=0x80, length=16)), cpl=Beat(0, header(tag=0, addr=0, length=16)))


def test_request_preconditions():
    m = RdTableModel(entries=4, max_read=512)
    for addr, length in [(8, 16), (0, 24), (0, 0), (0, 1024), (0xFFFF_FFF0, 32)]:
        with pytest.raises(ModelError):
            m.request(addr=addr, length=length)


def test_interleaved_reads_end_to_end():
    """Many reads outstanding at once, their completions interleaved packet by packet in a
    random order: every tile gets its bytes in order, with its key_index/aes, one cc."""
    rng = random.Random(3)
    for params in ({}, {"entries": 16, "rcb": 128, "max_payload": 128, "max_read": 512},
                   {"entries": 8, "lanes": 2}, {"entries": 8, "lanes": 4}):
        m = RdTableModel(**params)
        p = m.params
        pending, reads = {}, {}
        for _ in range(600):
            if len(m.table) < p.entries and rng.random() < 0.5:
                length = p.granule * rng.randint(1, p.max_read // p.granule)
                addr = p.granule * rng.randrange(1 << 24)
                req = dict(tile=rng.randrange(1472), key_index=rng.randrange(16), aes=rng.randrange(2))
                tag = m.request(addr=addr, length=length, **req)
                data = rng.randbytes(length)
                split = random_split(addr, length, p.rcb, p.max_payload, rng, lanes=p.lanes)
                assert all(n % p.granule == 0 for _, n in split)
                pending[tag] = completion_packets(tag, addr, data, split, p.lanes, rng, junk=True)
                reads[tag] = (req, data, [])
            elif pending:
                tag = rng.choice(list(pending))
                out = m.send(pending[tag].pop(0))
                if not pending[tag]:
                    del pending[tag]
                reads[tag][2].extend(out)
                if out[-1].hdr["cc"]:
                    req, data, beats = reads.pop(tag)
                    got, pkt = b"", b""
                    for b in beats:
                        pkt += b.data.to_bytes(p.beat_bytes, "little")
                        if b.last:
                            got += pkt[:b.hdr["length"]]
                            pkt = b""
                    assert got == data
                    assert all((b.hdr["tile"], b.hdr["key_index"], b.hdr["aes"]) ==
                               (req["tile"], req["key_index"], req["aes"]) for b in beats)
                    assert sum(b.hdr["cc"] and b.last for b in beats) == 1
        assert not m.errors


# ---- model: bad completions -----------------------------------------------------------
def one_read(entries=16, addr=0x1000, length=512, **params):
    m = RdTableModel(entries=entries, **params)
    tag = m.request(tile=5, key_index=3, aes=1, addr=addr, length=length)
    return m, tag


def cpl(tag, addr, length, beats=None, data=0xAB):
    n = length // 16 if beats is None else beats
    n = max(n, 1)
    return [Beat(data + k, header(tag=tag, addr=addr, length=length), int(k == 0), int(k == n - 1))
            for k in range(n)]


@pytest.mark.parametrize("name, packet, cause", [
    ("free tag", cpl(1, 0x1000, 64), Cause.UNKNOWN_TAG),
    ("tag beyond entries", cpl(200, 0x1000, 64), Cause.UNKNOWN_TAG),
    ("overrun", cpl(0, 0x1000, 528, beats=33), Cause.OVERRUN),
    ("address ahead", cpl(0, 0x1040, 64), Cause.ADDRESS),
    ("address behind", cpl(0, 0x0FC0, 64), Cause.ADDRESS),
    ("address misaligned", cpl(0, 0x1008, 64), Cause.ADDRESS),
    ("length 0", cpl(0, 0x1000, 0), Cause.MALFORMED),
    ("length not a granule", cpl(0, 0x1000, 56, beats=4), Cause.MALFORMED),
    ("above max payload", cpl(0, 0x1000, 384), Cause.MALFORMED),
    ("off the RCB", cpl(0, 0x1000, 48), Cause.BOUNDARY),
    ("unknown beats overrun", cpl(3, 0x1000, 2000, beats=2), Cause.UNKNOWN_TAG),   # priority
    ("overrun beats address", cpl(0, 0x1010, 1024, beats=2), Cause.OVERRUN),        # priority
    ("address beats malformed", cpl(0, 0x1004, 0), Cause.ADDRESS),                  # priority
])
def test_bad_completion_dropped_whole(name, packet, cause):
    m, tag = one_read()
    out = m.send(packet)
    assert out == [], name
    assert [(t, c) for _, t, c in m.errors] == [(packet[0].hdr["tag"], cause)], name
    assert (m.err_count, m.err_tag, m.err_cause) == (1, packet[0].hdr["tag"], cause)
    # the read is untouched: its legal completions still go through
    assert m.table[tag].next == 0x1000 and m.table[tag].remaining == 512
    out = m.send(cpl(tag, 0x1000, 256)) + m.send(cpl(tag, 0x1100, 256))
    assert len(out) == 32 and out[-1].hdr["cc"] == 1 and m.outstanding == 0
    assert len(m.errors) == 1


def test_completion_after_finish_and_repeat():
    m, tag = one_read(length=128)
    assert m.send(cpl(tag, 0x1000, 64))
    assert m.send(cpl(tag, 0x1000, 64)) == []          # repeated: address behind
    assert m.errors[-1][2] is Cause.ADDRESS
    assert m.send(cpl(tag, 0x1040, 64))[-1].hdr["cc"] == 1
    assert m.send(cpl(tag, 0x1080, 64)) == []          # after the read finished: free tag
    assert m.errors[-1][1:] == (tag, Cause.UNKNOWN_TAG)


def test_framing_surplus_beats_dropped():
    m, tag = one_read()
    pkt = cpl(tag, 0x1000, 64, beats=6)
    out = m.send(pkt)
    assert [b.data for b in out] == [p.data for p in pkt[:4]] and out[-1].last == 1
    assert [(t, c) for _, t, c in m.errors] == [(tag, Cause.FRAMING)]
    assert m.errors[0][0] == m.cycle - 2               # raised at the 4th beat
    assert m.table[tag].remaining == 448


def test_framing_short_packet_padded():
    m, tag = one_read()
    pkt = cpl(tag, 0x1000, 128, beats=3)
    out = m.send(pkt)
    assert [b.data for b in out] == [p.data for p in pkt] + [0] * 5
    assert [b.last for b in out] == [0] * 7 + [1] and [b.first for b in out] == [1] + [0] * 7
    assert [(t, c) for _, t, c in m.errors] == [(tag, Cause.FRAMING)]
    assert m.table[tag].remaining == 384


def test_framing_single_beat_length_with_surplus():
    m, tag = one_read(length=16)
    out = m.send(cpl(tag, 0x1000, 16, beats=3))
    assert len(out) == 1 and out[0].last and out[0].hdr["cc"] and m.outstanding == 0
    assert [(t, c) for _, t, c in m.errors] == [(tag, Cause.FRAMING)]


def test_later_beat_headers_and_first_ignored():
    m, tag = one_read(length=64)
    pkt = cpl(tag, 0x1000, 64)
    for b in pkt[1:]:
        b.hdr = header(tag=99, addr=0xdead0, length=16, tile=7)
        b.first = 1
    out = m.send(pkt)
    assert len(out) == 4 and all(b.hdr == out[0].hdr for b in out) and not m.errors


def test_error_counter_saturates():
    m, _ = one_read()
    m.err_count = (1 << 32) - 2
    m.send(cpl(9, 0, 16))
    m.send(cpl(9, 0, 16))
    assert m.err_count == (1 << 32) - 1


# ---- model: timeout and reset ---------------------------------------------------------
@pytest.mark.parametrize("timeout", [1, 3, 4, 5, 17, 40, 1000])
def test_timeout_bounds(timeout):
    rng = random.Random(timeout)
    m = RdTableModel(entries=16)
    issued = {}
    for _ in range(12):
        m.idle(rng.randrange(timeout + 3), timeout)
        tag = m.request(addr=0x40 * rng.randrange(100), length=64, timeout=timeout)
        issued[tag] = m.cycle
    m.idle(3 * timeout + 40, timeout)
    assert m.outstanding == 0 and m.timeout_count == len(m.timeouts)
    lo, hi = timeout_bounds(timeout, simultaneous=12)
    for cycle, _tag, when in m.timeouts:
        assert lo <= cycle - when <= hi, (timeout, cycle - when)
    assert len(m.timeouts) >= 12
    # a completion for a timed-out read is an unknown tag
    m.send(cpl(m.timeouts[0][1], 0, 64))
    assert m.errors[-1][2] is Cause.UNKNOWN_TAG


def test_timeout_off_and_completed_reads_never_time_out():
    m = RdTableModel(entries=4)
    m.request(addr=0, length=64)
    m.idle(10_000, 0)
    assert m.timeout_count == 0 and m.outstanding == 1
    m.request(addr=0x100, length=64)
    m.idle(10, 100)
    m.send(cpl(1, 0x100, 64), timeout=100)
    m.idle(500, 100)
    assert [t for _, t, _ in m.timeouts] == [0]


def test_expired_entry_unknown_until_reported():
    m = RdTableModel(entries=4)
    for t in range(3):
        m.request(addr=0x100 * t, length=64)
    # the counter runs from the cycle after `timeout` is set, hits every cycle, and each
    # hit ticks the ages one cycle later: after AGE_EXPIRED + 2 cycles all three have
    # expired together
    m.idle(AGE_EXPIRED + 1, timeout=4)
    assert all(e.age == AGE_EXPIRED - 1 for e in m.table.values())
    m.idle(1, timeout=4)
    assert m.timeouts == [] and all(e.age == AGE_EXPIRED for e in m.table.values())
    m.step(cpl=cpl(2, 0x200, 64)[0], timeout=4)   # expired: unknown even before its report
    assert m.errors[-1][1:] == (2, Cause.UNKNOWN_TAG)
    assert [t for _, t, _ in m.timeouts] == [0]
    m.idle(2, 4)
    assert [t for _, t, _ in m.timeouts] == [0, 1, 2] and m.timeout_tag == 2
    assert m.request(addr=0, length=16) == 0


def test_reset_frees_everything():
    m = RdTableModel(entries=4)
    for t in range(4):
        m.request(addr=0x100 * t, length=64)
    m.step(cpl=cpl(0, 0, 64)[0])
    m.reset()
    assert m.outstanding == 0 and m.err_count == 0 and not m.req_out and not m.cpl_out
    assert m.request(addr=0, length=16) == 0
    assert m.send(cpl(1, 0x100, 64)) == [] and m.errors[-1][2] is Cause.UNKNOWN_TAG


# ---- model: wider beats -------------------------------------------------------------------
def test_lanes4_granule_is_a_beat():
    """At lanes = 4 a request and a legal completion are whole 64-byte beats: a length that
    is not is MALFORMED, an address that is not is never the expected one (ADDRESS, which
    is checked first); requests that are not whole beats break the preconditions."""
    m, tag = one_read(lanes=4, rcb=128, length=512)
    for addr, length in [(0x1000, 16), (0x1000, 48), (0x1000, 80), (0x1000, 112)]:
        assert m.send(cpl(tag, addr, length, beats=1)) == []
        assert m.errors[-1][1:] == (tag, Cause.MALFORMED), (addr, length)
    for addr, length in [(0x1010, 64), (0x1020, 16), (0x1030, 128)]:
        assert m.send(cpl(tag, addr, length, beats=1)) == []
        assert m.errors[-1][1:] == (tag, Cause.ADDRESS), (addr, length)
    assert m.send(cpl(tag, 0x1000, 64, beats=1)) == []       # off the 128-byte RCB
    assert m.errors[-1][1:] == (tag, Cause.BOUNDARY)
    assert m.table[tag].next == 0x1000 and m.table[tag].remaining == 512
    out = m.send(cpl(tag, 0x1000, 256, beats=4)) + m.send(cpl(tag, 0x1100, 256, beats=4))
    assert len(out) == 8 and out[-1].hdr["cc"] == 1 and m.outstanding == 0
    for addr, length in [(0x20, 64), (0x40, 32), (0x40, 0)]:
        with pytest.raises(ModelError):
            m.request(addr=addr, length=length)


@pytest.mark.parametrize("lanes", [2, 4])
def test_splits_are_whole_beats(lanes):
    rng = random.Random(lanes)
    g = 16 * lanes
    for _ in range(500):
        rcb, mps = rng.choice([(64, 256), (64, 128), (128, 128), (128, 256)])
        addr, length = g * rng.randrange(1 << 20), g * rng.randint(1, 1024 // g)
        for mode in ("uniform", "finest", "coarsest"):
            split = random_split(addr, length, rcb, mps, rng, mode, lanes=lanes)
            assert is_legal_split(addr, length, split, rcb, mps, lanes=lanes)
            assert all(a % g == 0 and n % g == 0 for a, n in split)
    with pytest.raises(ValueError):
        random_split(16, 64, lanes=lanes)
    with pytest.raises(ValueError):
        count_splits(0, g + 16, lanes=lanes)
    assert is_legal_split(0, 80, [(0, 64), (64, 16)]) and not is_legal_split(0, 80, [(0, 64), (64, 16)], lanes=lanes)


def test_tick_reaches_the_ages_one_cycle_late():
    """The tick counter hits every ceil(T / 4) cycles; it counts with the `timeout` of the
    cycle before, and the ages move one cycle after a hit."""
    m = RdTableModel(entries=4)
    m.request(addr=0, length=64)
    ages = []
    for _ in range(9):
        m.step(timeout=8)             # period 2: counts from the 2nd step, hits at the 3rd, 5th, ...
        ages.append(m.table[0].age)
    assert ages == [0, 0, 0, 1, 1, 2, 2, 3, 3]
    m.step(timeout=0)                 # the last hit's tick arrives; still counting with 8
    assert m.table[0].age == 4 and m.tick_count == 1
    m.step(timeout=0)                 # now stopped and cleared
    m.idle(20, timeout=0)
    assert m.table[0].age == 4 and m.tick_count == 0
