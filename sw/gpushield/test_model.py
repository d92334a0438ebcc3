"""Unit tests of the GPUShield software: id cipher, pointers and RBT entries, the golden
BCU model, the driver shim and the trace generators. The cipher's expected values are
worked by hand from the contract (docs/gpushield.md) (with the FIPS-197 S-box), not taken from the model."""
import os
import random

import pytest
from amaranth.sim import Simulator

from hw.gpushield.cipher import decrypt_id as rtl_decrypt
from hw.gpushield.layout import Cause, PtrType, log_layout, pointer_layout, rbt_entry_layout, req_layout
from sw.gpushield.driver import Driver
from sw.gpushield.model import (
    BCUModel,
    WarpRequest,
    decrypt_id,
    encrypt_id,
    feistel_f,
    pack_entry,
    pack_fields,
    pointer_addr,
    pointer_eid,
    pointer_kind,
    round_keys,
    t1_pointer,
    t2_pointer,
    t3_pointer,
    unpack_entry,
    with_addr,
)
from sw.gpushield.traces import KERNELS, VIOLATIONS, kernel, to_request, violations

SEED = int(os.environ.get("SEED") or "7")
KEYS = [0, 0x0123456789ABCDEF, (1 << 64) - 1, 0xDEADBEEF_CAFEF00D]


# ---------------------------------------------------------------------------- cipher
def test_hand_vector():
    """id 0x1234 under K = 0x0123456789ABCDEF, round by round (L, R are 7-bit halves):
    L=0x24 R=0x34.  r0: k=0xCDEF, S[0x34^0xEF=0xDB]=0xB9, F=(0xB9^0xCD)&0x7F=0x74 -> L=0x34 R=0x24^0x74=0x50
    r1: k=0x89AB, S[0x50^0xAB=0xFB]=0x0F, F=(0x0F^0x89)&0x7F=0x06 -> L=0x50 R=0x34^0x06=0x32
    r2: k=0x4567, S[0x32^0x67=0x55]=0xFC, F=(0xFC^0x45)&0x7F=0x39 -> L=0x32 R=0x50^0x39=0x69
    r3: k=0x0123, S[0x69^0x23=0x4A]=0xD6, F=(0xD6^0x01)&0x7F=0x57 -> L=0x69 R=0x32^0x57=0x65
    result (0x69 << 7) | 0x65 = 0x34E5."""
    assert round_keys(0x0123456789ABCDEF) == [0xCDEF, 0x89AB, 0x4567, 0x0123]
    assert feistel_f(0x34, 0xCDEF) == 0x74
    assert encrypt_id(0x1234, 0x0123456789ABCDEF) == 0x34E5
    assert decrypt_id(0x34E5, 0x0123456789ABCDEF) == 0x1234
    # the zero key: S[x] ^ 0, id 0: r0 F(0)=S[0]&0x7F=0x63 -> (0, 0x63); r1 F(0x63)=S[0x63]&0x7F
    s = __import__("sw.aes.model", fromlist=["SBOX"]).SBOX
    left, right = 0, 0
    for _ in range(4):
        left, right = right, left ^ (s[right] & 0x7F)
    assert encrypt_id(0, 0) == (left << 7) | right


@pytest.mark.parametrize("key", KEYS + [random.Random(SEED).getrandbits(64)])
def test_round_trip_all_ids(key):
    encs = [encrypt_id(i, key) for i in range(1 << 14)]
    assert sorted(encs) == list(range(1 << 14)), "not a permutation"
    assert all(decrypt_id(e, key) == i for i, e in enumerate(encs))


def test_keys_differ():
    a = [encrypt_id(i, KEYS[1]) for i in range(256)]
    b = [encrypt_id(i, KEYS[3]) for i in range(256)]
    assert sum(x != y for x, y in zip(a, b)) > 240


def test_rtl_decrypt_matches_model():
    """The decrypt circuit (its four rounds chained; the BCU runs one per pipeline stage)
    (Amaranth simulator) against the model."""
    from amaranth.hdl import Module, Signal
    m = Module()
    enc, key = Signal(14), Signal(64)
    out = Signal(14)
    m.d.comb += out.eq(rtl_decrypt(m, enc, key))
    rng = random.Random(SEED)
    cases = [(rng.randrange(1 << 14), rng.choice(KEYS + [rng.getrandbits(64)])) for _ in range(300)]

    async def bench(ctx):
        for e, k in cases:
            ctx.set(enc, e)
            ctx.set(key, k)
            assert ctx.get(out) == decrypt_id(e, k), (hex(e), hex(k))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


# ---------------------------------------------------------------------------- layouts
def test_pointer_fields():
    assert pointer_layout.size == 64 and rbt_entry_layout.size == 128
    assert req_layout(32).size == 64 + 64 * 32 + 32 + 2 + 1 + 16
    p = t2_pointer(0x1234_5678_9ABC, 0x2ABC)
    assert p == (1 << 62) | (0x2ABC << 48) | 0x1234_5678_9ABC
    assert pointer_kind(p) is PtrType.T2 and pointer_eid(p) == 0x2ABC
    assert pointer_addr(p) == 0x1234_5678_9ABC
    q = t3_pointer(0x4000, 12)
    assert q == (2 << 62) | (12 << 48) | 0x4000 and pointer_kind(q) is PtrType.T3
    assert pointer_kind(q | (1 << 54)) is PtrType.INVALID        # reserved bits 61..54
    assert pointer_kind(t1_pointer(5)) is PtrType.T1 and t1_pointer(5) == 5
    assert pointer_kind(3 << 62) is PtrType.INVALID
    assert with_addr(p, 0x10) == (p & ~((1 << 48) - 1)) | 0x10


def test_rbt_entry_fields():
    e = pack_entry(0xABCD_0000_1000, 0x1234_5678, valid=1, read_only=1, kernel_id=0xFED)
    assert e == 0xABCD_0000_1000 | (0x1234_5678 << 48) | (1 << 80) | (1 << 81) | (0xFED << 82)
    assert unpack_entry(e) == {"base": 0xABCD_0000_1000, "size": 0x1234_5678, "valid": 1,
                               "read_only": 1, "kernel_id": 0xFED, "reserved": 0}


# ---------------------------------------------------------------------------- model
class Env:
    def __init__(self, seed=SEED, lanes=32):
        self.rng = random.Random(seed)
        self.drv = Driver(self.rng, lanes=lanes)
        self.model = BCUModel(self.drv.mem.read128, lanes)
        self.lanes = lanes

    def launch(self, **kw):
        launch = self.drv.launch(**kw)
        self.model.rbt_base, self.model.kernel_id, self.model.id_key = (
            launch.rbt_base, launch.kernel_id, launch.id_key)
        self.model.launch()
        return launch


def test_model_basic_cases():
    env = Env()
    env.drv.alloc_global("a", 1000)
    env.drv.alloc_global("r", 512, read_only=True)
    L = env.launch()
    m = env.model
    full = (1 << 32) - 1

    def req(name, first, store=False, mask=full, size_log2=2):
        return WarpRequest(L.ptr(name, 0), [L.ptr(name, first + (4 * k)) for k in range(32)],
                           mask, size_log2, store, tag=7)

    r = m.check(req("a", 0))
    assert r.ok and [u.level for u in r.uops] == ["mem"]
    assert r.fetches == [L.rbt_base + 16 * L.buffers["a"].id]
    assert m.check(req("a", 128)).uops[0].level == "L1"
    # last lane's bytes 996..999: in bounds; one more byte is not
    assert m.check(req("a", 1000 - 128)).ok
    r = m.check(req("a", 1000 - 128 + 1))
    assert (r.ok, r.cause, r.lane, r.addr) == (False, Cause.OUT_OF_BOUNDS, 31, L.buffers["a"].base + 1000 - 3)
    r = m.check(req("a", -4))
    assert (r.cause, r.lane, r.addr) == (Cause.OUT_OF_BOUNDS, 0, L.buffers["a"].base - 4)
    assert m.check(req("r", 0)).ok
    assert m.check(req("r", 0, store=True)).cause is Cause.READ_ONLY
    # an inactive lane out of bounds does not count
    assert m.check(req("a", 1000 - 128 + 4, mask=full >> 1)).ok
    assert m.check(req("a", 0, mask=0)).ok
    assert m.log_count == 3 and m.log_first[:2] == (7, Cause.OUT_OF_BOUNDS)
    assert (m.l1_hits, m.l2_hits, m.misses) == (m.l1_hits, 0, 2)


def test_model_types_and_groups():
    env = Env()
    for n in "abcde":
        env.drv.alloc_global(n, 4096)
    env.drv.alloc_t3("t", 12)
    L = env.launch()
    m = env.model
    full = (1 << 32) - 1
    # Type 1: never checked
    r = WarpRequest(t1_pointer(0), [t1_pointer(1 << 47) for _ in range(32)], full)
    assert m.check(r).ok and m.check(r).uops[0].level == "direct"
    # one lane of invalid type -> cause 5, logged lane is that lane
    r = WarpRequest(L.ptr("a"), [L.ptr("a", 4 * k) for k in range(32)], full)
    r.addrs[9] |= 3 << 62
    res = m.check(r)
    assert (res.cause, res.lane) == (Cause.POINTER_TYPE, 9)
    # Type 3: inside the 4 KiB block, then one byte outside it
    t = L.buffers["t"]
    assert m.check(WarpRequest(L.ptr("t"), [L.ptr("t", 4 * k) for k in range(32)], full)).ok
    res = m.check(WarpRequest(L.ptr("t"), [L.ptr("t", 4096 - 127 + 4 * k) for k in range(32)], full))
    assert (res.cause, res.lane, res.addr) == (Cause.OUT_OF_BOUNDS, 31, t.base + 4096 - 3)
    # five ids in one warp: five lookups, each lane against its own buffer
    names = "abcde"
    r = WarpRequest(L.ptr("a"), [L.ptr(names[k % 5], 4 * k) for k in range(32)], full)
    res = m.check(r)
    assert res.ok and len(res.uops) == 5
    assert [u.lanes[0] for u in res.uops] == [0, 1, 2, 3, 4]
    # one lane of b far beyond b (inside e): caught although e's bounds would allow it
    r.addrs[6] = L.ptr("b", L.buffers["e"].base - L.buffers["b"].base + 8)
    res = m.check(r)
    assert (res.cause, res.lane) == (Cause.OUT_OF_BOUNDS, 6)


def test_model_replacement():
    """L1: pseudo-LRU over 4 ways; L2: FIFO over 64; both flushed at launch."""
    env = Env()
    names = [f"b{i}" for i in range(70)]
    for n in names:
        env.drv.alloc_global(n, 256)
    L = env.launch()
    m = env.model
    one = lambda n: WarpRequest(L.ptr(n), [L.ptr(n)] * 32, 1)  # noqa: E731
    levels = lambda ns: [m.check(one(n)).uops[0].level for n in ns]  # noqa: E731
    assert levels(names[:4]) == ["mem"] * 4
    assert levels(names[:4]) == ["L1"] * 4
    # ways 0..3 hold b0..b3, touched in order: tree points at way 0 (b0) as victim
    assert levels(["b4"]) == ["mem"] and m.l1[0][0] == pointer_eid(L.pointers["b4"])
    assert levels(["b1", "b2", "b3", "b4"]) == ["L1"] * 4
    assert levels(["b0"]) == ["L2"]
    # 70 distinct ids through a 64-entry FIFO: b0..b5 are evicted by b64..b69
    levels(names)
    assert levels(["b6"]) in (["L1"], ["L2"]) and levels(["b0"]) == ["mem"]
    env.launch()
    m.id_key = L.id_key   # keep the pointers valid; a launch still flushes
    assert levels(["b6"]) == ["mem"]


# ---------------------------------------------------------------------------- traces, driver
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_traces_in_bounds(name):
    """Every op of every trace passes the model (no false positive), with ids decrypting
    to the right entries."""
    env = Env()
    k = kernel(name, env.drv, seed=SEED)
    L = env.launch()
    n = 0
    for op in k.ops():
        r = env.model.check(to_request(op, L, n))
        assert r.ok, (name, n, r)
        n += 1
    assert n >= 16


def test_violations_all_caught():
    env = Env()
    for n, (size, ro) in {"x": (4096, False), "y": (8192, True), "z": (2048, False)}.items():
        env.drv.alloc_global(n, size, read_only=ro)
    env.drv.alloc_t3("t", 12)
    prev = env.launch()
    L = env.launch()
    seen = set()
    for _trial in range(20):
        for kind, req, cause in violations(L, prev, env.rng):
            r = env.model.check(req)
            assert not r.ok, (kind, r)
            assert cause is None or r.cause is cause, (kind, r.cause, cause)
            seen.add(kind)
    assert seen == set(VIOLATIONS)


def test_driver_places_a_buffer_by_hand():
    env = Env()
    env.drv.alloc_global("g", 100)
    # any alignment and a bound past 2**48 (the limit's carry); the allocator does not move
    odd = env.drv.place_global("odd", 0x5555_5555_5555, 0x5555_5555)
    wrap = env.drv.place_global("wrap", (1 << 48) - (1 << 31), 0xFFFF_FFFF, read_only=True)
    after = env.drv.alloc_global("h", 16, gap=0)
    assert after.base == env.drv.buffers["g"].base + 256        # the allocator's next slot
    assert (odd.base, odd.size, odd.kind, odd.read_only) == (0x5555_5555_5555, 0x5555_5555, "global", False)
    assert wrap.read_only and wrap.end > 1 << 48
    launch = env.launch()
    for buf in (odd, wrap):
        e = unpack_entry(env.drv.mem.read128(launch.rbt_base + 16 * launch.buffers[buf.name].id))
        assert (e["base"], e["size"], e["valid"]) == (buf.base, buf.size, 1)
    for name, base, size, error in [("neg", -16, 16, "virtual address"), ("top", 1 << 48, 16, "virtual address"),
                                    ("huge", 0, 1 << 32, "32 bits"), ("odd", 0x1000, 16, "exists")]:
        with pytest.raises(ValueError, match=error):
            env.drv.place_global(name, base, size)


def test_driver_launch():
    env = Env()
    env.drv.alloc_global("g", 100)
    locs = env.drv.alloc_local("loc", 64, 8)
    env.drv.alloc_heap("heap", 1 << 16)
    with pytest.raises(ValueError):
        env.drv.alloc_heap("heap2", 16)
    a = env.launch()
    b = env.launch()
    assert a.id_key != b.id_key and a.kernel_id != b.kernel_id
    ids = [x.id for x in b.buffers.values()]
    assert len(set(ids)) == len(ids) == 10
    for launch in (a, b):
        for name, buf in launch.buffers.items():
            p = launch.pointers[name]
            assert decrypt_id(pointer_eid(p), launch.id_key) == buf.id
            e = unpack_entry(env.drv.mem.read128(launch.rbt_base + 16 * buf.id))
            if launch is b:
                assert (e["base"], e["size"], e["valid"], e["kernel_id"]) == (buf.base, buf.size, 1, b.kernel_id)
    # local buffers are per thread and adjacent
    bl = [b.buffers[n] for n in locs]
    assert all(x.end <= y.base for x, y in zip(bl, bl[1:]))
    assert env.drv.read_log(0, 0) is None
    word = pack_fields(log_layout(32), tag=0xBEEF, cause=Cause.KERNEL, lane=17, addr=0x1234_5678)
    v = env.drv.read_log(word, 4)
    assert (v.count, v.tag, v.cause, v.lane, v.addr) == (4, 0xBEEF, Cause.KERNEL, 17, 0x1234_5678)
    env.launch(scrub=True)
    assert len(env.drv.written[0]) == 10
    # a chosen id key (directed tests) encrypts the pointers' ids; one too wide is refused
    c = env.launch(key=0x0123_4567_89AB_CDEF)
    assert c.id_key == 0x0123_4567_89AB_CDEF
    assert all(decrypt_id(pointer_eid(c.pointers[n]), c.id_key) == buf.id for n, buf in c.buffers.items())
    with pytest.raises(ValueError, match="64-bit"):
        env.launch(key=1 << 64)
