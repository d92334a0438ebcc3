"""Unit tests of the golden model's kernel slots and RBT protection, and of the driver's
slots (docs/gpushield.md, "Kernel slots" and "RBT protection"). The expected values are
worked out by hand in each test (addresses, lanes, causes), not taken from the model."""
import random

import pytest

from hw.gpushield.layout import RBT_BYTES, Cause
from sw.gpushield.driver import Driver, SparseMemory
from sw.gpushield.model import (
    BCUModel,
    WarpRequest,
    decrypt_id,
    pointer,
    pointer_eid,
    rbt_block_hit,
    t1_pointer,
    t3_pointer,
    unpack_entry,
    with_addr,
)

FULL = (1 << 32) - 1
B = 0x7000_0000_0000          # an RBT base aligned to 256 KiB


def test_rbt_block_hit_by_hand():
    assert RBT_BYTES == 256 * 1024
    assert not rbt_block_hit(B - 1, 1, B)            # the byte below
    assert rbt_block_hit(B - 1, 2, B)                # crosses into the first byte
    assert not rbt_block_hit(B - 8, 8, B) and rbt_block_hit(B - 7, 8, B)
    assert rbt_block_hit(B, 1, B) and rbt_block_hit(B + 0x2_0000, 4, B)
    assert rbt_block_hit(B + RBT_BYTES - 1, 1, B) and rbt_block_hit(B + RBT_BYTES - 1, 8, B)
    assert not rbt_block_hit(B + RBT_BYTES, 1, B)    # the first byte above
    # no wrap-around at the top of the 48-bit space onto a table at 0
    assert not rbt_block_hit((1 << 48) - 2, 4, 0) and rbt_block_hit(0, 1, 0)
    # a misaligned base: its aligned block is what is protected (decision 13)
    assert rbt_block_hit(B, 1, B + 0x100) and not rbt_block_hit(B + RBT_BYTES + 0x80, 1, B + 0x100)


class Env:
    """One context, kernels on slots 0 and 1 (buffer a on slot 0, b on slot 1)."""

    def __init__(self, seed=1):
        self.drv = Driver(random.Random(seed), slots=4)
        self.drv.alloc_global("a", 1024)
        self.drv.alloc_global("b", 2048, read_only=True)
        self.model = BCUModel(self.drv.mem.read128)
        self.la = self.launch(0, ["a"])
        self.lb = self.launch(1, ["b"])

    def launch(self, slot, names):
        la = self.drv.launch(slot=slot, names=names)
        st = self.model.slots[slot]
        st.rbt_base, st.kernel_id, st.id_key = la.rbt_base, la.kernel_id, la.id_key
        self.model.launch(slot)
        return la

    @staticmethod
    def warp(launch, name, first=0, store=False, mask=FULL):
        return WarpRequest(launch.ptr(name), [launch.ptr(name, first + 4 * k) for k in range(32)], mask, 2, store)


def test_driver_slots():
    with pytest.raises(ValueError):
        Driver(rbt_base=B + 16)                      # not aligned to 256 KiB
    with pytest.raises(ValueError):
        Driver(rbt_base=(1 << 48) - 2 * RBT_BYTES)   # no room for 4 tables
    with pytest.raises(ValueError):
        Driver(slots=5)
    env = Env()
    drv, la, lb = env.drv, env.la, env.lb
    assert [drv.rbt_base_of(s) for s in range(4)] == [B, B + RBT_BYTES, B + 2 * RBT_BYTES, B + 3 * RBT_BYTES]
    with pytest.raises(ValueError):
        drv.rbt_base_of(4)
    with pytest.raises(ValueError):
        drv.launch(slot=2, names=["nope"])
    assert (la.slot, la.rbt_base, lb.slot, lb.rbt_base) == (0, B, 1, B + RBT_BYTES)
    assert set(la.buffers) == {"a"} and set(lb.buffers) == {"b"} and la.kernel_id != lb.kernel_id
    for launch, name in ((la, "a"), (lb, "b")):
        buf = launch.buffers[name]
        assert decrypt_id(pointer_eid(launch.pointers[name]), launch.id_key) == buf.id
        e = unpack_entry(drv.mem.read128(launch.rbt_base + 16 * buf.id))
        assert (e["base"], e["size"], e["kernel_id"]) == (buf.base, buf.size, launch.kernel_id)
    assert drv.written[0] == {la.buffers["a"].id} and drv.written[1] == {lb.buffers["b"].id}
    # scrubbing slot 1's table leaves slot 0's alone
    lb2 = drv.launch(slot=1, names=["b"], scrub=True)
    assert drv.mem.read128(B + RBT_BYTES + 16 * lb.buffers["b"].id) == (
        0 if lb.buffers["b"].id != lb2.buffers["b"].id else drv.mem.read128(B + RBT_BYTES + 16 * lb2.buffers["b"].id))
    assert unpack_entry(drv.mem.read128(B + 16 * la.buffers["a"].id))["valid"] == 1
    # kernel ids of the kernels running on the other slots are never reused
    for _ in range(300):
        x = drv.launch(slot=2, names=[])
        assert x.kernel_id not in (drv.launches[0].kernel_id, drv.launches[1].kernel_id)


def test_inactive_and_missing_slots():
    env = Env()
    m, la = env.model, env.la
    with pytest.raises(ValueError):
        BCUModel(SparseMemory().read128, slots=0)
    with pytest.raises(ValueError):
        m.check(env.warp(la, "a"), 4)                # does not fit req_slot
    # slot 2: never launched. Lane 0 is the lowest address: logged, cause 3, no lookup
    r = m.check(env.warp(la, "a"), 2)
    assert (r.ok, r.cause, r.lane, r.addr, r.fetches) == (False, Cause.KERNEL, 0, la.buffers["a"].base, [])
    assert (m.l1_hits, m.l2_hits, m.misses) == (0, 0, 0)
    # whatever the pointers: invalid type, Type 1, a store into an RBT
    for p in (pointer(3, 0x40), t1_pointer(0x40), t1_pointer(B)):
        r = m.check(WarpRequest(p, [p] * 32, FULL, 2, True), 2)
        assert (r.ok, r.cause) == (False, Cause.KERNEL)
    assert m.check(WarpRequest(pointer(3, 0), [0] * 32, 0), 2).ok     # no active lane
    assert m.slots[2].log_count == 4 and m.slots[2].log_first[1] is Cause.KERNEL
    assert m.slots[0].log_count == m.slots[1].log_count == 0
    # a model of 3 slots: slot 3 does not exist; cause 3, and no log has it
    m3 = BCUModel(env.drv.mem.read128, slots=3)
    r = m3.check(env.warp(la, "a"), 3)
    assert (r.ok, r.cause) == (False, Cause.KERNEL) and all(st.log_count == 0 for st in m3.slots)
    # retire: slot 0 fails from then on, until it is launched again
    assert m.check(env.warp(la, "a"), 0).ok
    m.retire(0)
    assert m.check(env.warp(la, "a"), 0).cause is Cause.KERNEL
    m.launch(0)
    assert m.check(env.warp(la, "a"), 0).ok
    # after reset no slot is active
    m.reset()
    assert [m.check(env.warp(la, "a"), s).cause for s in range(4)] == [Cause.KERNEL] * 4


def test_cache_tags_and_flush_per_slot():
    """Slot 2 configured like slot 0 (same key, table and kernel id): the same encrypted
    id on the two slots is two entries; a launch of slot 2 flushes only slot 2's."""
    env = Env()
    m, la = env.model, env.la
    st0, st2 = m.slots[0], m.slots[2]
    st2.rbt_base, st2.kernel_id, st2.id_key = st0.rbt_base, st0.kernel_id, st0.id_key
    m.launch(2)
    level = lambda s: m.check(env.warp(la, "a"), s).uops[0].level   # noqa: E731
    assert [level(0), level(2), level(0), level(2)] == ["mem", "mem", "L1", "L1"]
    m.check(WarpRequest(la.ptr("a"), [la.ptr("a", -4)] * 32, 1), 0)    # slot 0's log: 1
    m.check(WarpRequest(la.ptr("a"), [la.ptr("a", -4)] * 32, 1), 2)    # slot 2's log: 1
    m.launch(2)
    assert [level(0), level(2)] == ["L1", "mem"]
    assert (m.slots[0].log_count, m.slots[2].log_count) == (1, 0)
    # slot 1's pointer of b on slot 0: b's id decrypts under slot 0's key into slot 0's
    # table, which has a's entry only (or, 1 in 16,384, a's entry: b's address is not in a)
    r = m.check(env.warp(env.lb, "b"), 0)
    assert not r.ok and r.cause in (Cause.INVALID_ENTRY, Cause.OUT_OF_BOUNDS)


def test_rbt_stores_by_hand():
    env = Env()
    m, la = env.model, env.la
    rb = env.lb.rbt_base                             # slot 1's table, B + 256 KiB
    assert rb == B + RBT_BYTES
    t1 = t1_pointer
    # Type 1 store into slot 0's own table and into slot 1's: cause 6, lane 0 logged
    for base in (B, rb):
        r = m.check(WarpRequest(t1(base), [t1(base + 16 * k) for k in range(32)], FULL, 2, True), 0)
        assert (r.ok, r.cause, r.lane, r.addr, r.fetches) == (False, Cause.RBT_STORE, 0, base, [])
    # loads from the tables pass (Type 1 is not looked up)
    assert m.check(WarpRequest(t1(B), [t1(B + 16 * k) for k in range(32)], FULL, 2, False), 0).ok
    # a warp of a's lanes with lanes 7 (B + 32) and 3 (B + 16) moved into the table: lane 3
    # has the lower address; the in-bounds lanes are not the group
    p = la.ptr("a")
    addrs = [la.ptr("a", 4 * k) for k in range(32)]
    addrs[7], addrs[3] = with_addr(p, B + 32), with_addr(p, B + 16)
    r = m.check(WarpRequest(p, addrs, FULL, 2, True), 0)
    assert (r.cause, r.lane, r.addr, r.uops[0].lanes) == (Cause.RBT_STORE, 3, B + 16, [3, 7])
    # the same as a load: those lanes are out of a's bounds (lane 7 went furthest)
    r = m.check(WarpRequest(p, addrs, FULL, 2, False), 0)
    assert (r.cause, r.lane) == (Cause.OUT_OF_BOUNDS, 7)
    # 8-byte lanes: at B - 8 outside, at B - 7 and B - 4 crossing in; the top of slot 1's
    # table (slot 0's ends where slot 1's begins: rb - 4 is slot 0's)
    for addr, cause in ((B - 8, Cause.NONE), (B - 7, Cause.RBT_STORE), (B - 4, Cause.RBT_STORE),
                        (rb - 4, Cause.RBT_STORE), (rb + RBT_BYTES - 8, Cause.RBT_STORE),
                        (rb + RBT_BYTES - 1, Cause.RBT_STORE), (rb + RBT_BYTES, Cause.NONE)):
        r = m.check(WarpRequest(t1(addr), [t1(addr)] * 32, FULL, 3, True), 0)
        assert r.cause is cause, (hex(addr), r.cause)
    # B - 4 with 8 bytes reaches into slot 0's table (above); with 4 bytes it does not
    assert m.check(WarpRequest(t1(B - 4), [t1(B - 4)] * 32, FULL, 2, True), 0).ok
    # Type 3 lanes into the table: cause 6 before Type 3's own block check
    q = t3_pointer(B + 0x1000, 12)
    assert m.check(WarpRequest(q, [q] * 32, FULL, 2, True), 0).cause is Cause.RBT_STORE
    # a bad type wins over the table: lane 5 of invalid type, the other lanes into the table
    addrs = [t1(B)] * 32
    addrs[5] = pointer(3, 0x100)
    r = m.check(WarpRequest(t1(B), addrs, FULL, 2, True), 0)
    assert (r.cause, r.lane) == (Cause.POINTER_TYPE, 5)
    # inactive lanes into the table do not count
    assert m.check(WarpRequest(t1(0x100), [t1(0x100), t1(B)] * 16, 0x5555_5555, 2, True), 0).ok
    # slot 1 retired: its table is not protected any more; slot 0's still is
    m.retire(1)
    assert m.check(WarpRequest(t1(rb), [t1(rb)] * 32, FULL, 2, True), 0).ok
    assert m.check(WarpRequest(t1(B), [t1(B)] * 32, FULL, 2, True), 0).cause is Cause.RBT_STORE
    # each failure above is in slot 0's log; the first is the store into its own table
    assert m.slots[0].log_first[1:] == (Cause.RBT_STORE, 0, B) and m.slots[1].log_count == 0
