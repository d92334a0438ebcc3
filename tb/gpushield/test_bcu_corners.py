"""Directed corner tests of ``bcu`` (hw/gpushield) for the lines the rest of the regression
does not reach (docs/coverage.md, "Uncovered lines, and why"), against the golden model
(sw/gpushield/model.py) through :class:`~tb.gpushield.env.BcuTB`, with the documented
outcome (docs/gpushield.md) asserted by hand as well:

- a misaligned ``rbt_base`` whose entry address ``rbt_base + 16 id`` carries into the next
  256 KiB block (the fetch address's high half is the base's + 1), and the RBT-store check
  on the base's aligned block only ("RBT protection", "The range");
- a Type 3 pointer with reserved bits 61..54 set decodes as invalid (decision 5), as the
  base and as a lane;
- a launch of a slot while its misses wait in E behind a full answer queue (decision 8:
  answered, fill nothing);
- the data-path bits random traffic leaves still (``make coverage``'s data-path toggle
  check, docs/coverage.md): every slot's id key bits, and every bit of lane addresses,
  entry bases and sizes and the bounds (the driver's buffers are aligned, low and small).

Not here: ``log_count``'s saturation at 2**32 - 1 (2**32 failing responses per slot); a
value written into the counter through VPI does not take on Verilator (the next-state
logic computed before the write is registered at the next edge), so it cannot be started
near its ceiling either. It is proved instead, for every state: ``make formal
PROPERTY=log_counts_saturate`` (formal/gpushield.py).
"""
import dataclasses
import itertools
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gpushield.core import QUEUE_DEPTH
from hw.gpushield.layout import KEY_BITS, RBT_BYTES, RBT_ENTRY_BYTES, VA_BITS, Cause
from sw.gpushield.driver import Driver
from sw.gpushield.model import WarpRequest, t1_pointer, with_addr
from tb.common.stream import never
from tb.gpushield.env import LANES, BcuTB

FULL = (1 << LANES) - 1
RESERVED_LSB = 54           # Type 3 pointer bits 61..54 are reserved


def _contig(launch, name, first=0, store=False):
    """A warp of 4-byte accesses to consecutive words of buffer *name*."""
    return WarpRequest(launch.ptr(name), [launch.ptr(name, first + 4 * k) for k in range(LANES)],
                       FULL, 2, store)


def _same(ptr, store=False):
    """A warp whose base and every lane are *ptr*."""
    return WarpRequest(ptr, [ptr] * LANES, FULL, 2, store)


def _globals(drv, n, size=4096):
    names = [f"b{i}" for i in range(n)]
    for name in names:
        drv.alloc_global(name, size)
    return names


def _moved(tb, launch, base):
    """*launch* with its RBT at *base*: the entries of its buffers copied there."""
    for buf in launch.buffers.values():
        if buf.id is not None:
            tb.mem.write128(base + RBT_ENTRY_BYTES * buf.id,
                            tb.mem.read128(launch.rbt_base + RBT_ENTRY_BYTES * buf.id))
    return dataclasses.replace(launch, rbt_base=base)


@cocotb.test()
async def misaligned_rbt_base_carries(dut):
    """``rbt_base`` 4 KiB below the end of its 256 KiB block: every id >= 0x100 has its
    entry in the next block, so the RBT address's bits 47..18 are the base's + 1. The
    entries are copied to the misaligned table; every in-bounds warp passes with the fetch
    at ``rbt_base + 16 id``. A store into the base's aligned block fails (cause 6), one into
    the next block, where those entries are, passes (a misaligned base is protected on its
    aligned block only)."""
    tb = BcuTB(dut, mem_latency=(1, 8))
    await tb.reset()
    drv = tb.driver()
    names = _globals(drv, 12)
    aligned = drv.launch()
    base = aligned.rbt_base + RBT_BYTES - 0x1000
    ids = {name: aligned.buffers[name].id for name in names}
    launch = _moved(tb, aligned, base)
    await tb.launch(launch)
    carried = [n for n, i in ids.items() if (base + RBT_ENTRY_BYTES * i) >> 18 != base >> 18]
    assert carried, f"no id carries into the next block: {ids}"
    results = {n: tb.submit(_contig(launch, n)) for n in names}
    in_block = tb.submit(_same(t1_pointer(aligned.rbt_base + 0x40), store=True))
    next_block = tb.submit(_same(t1_pointer(aligned.rbt_base + RBT_BYTES + 0x40), store=True))
    await tb.check_state("misaligned rbt_base")
    wrong = [(n, r.cause.name, [hex(a) for a in r.fetches]) for n, r in results.items()
             if not r.ok or r.fetches != [base + RBT_ENTRY_BYTES * ids[n]]]
    assert not wrong, f"model answers / fetches differ from the documented ones: {wrong[:3]}"
    assert (in_block.cause, next_block.cause) == (Cause.RBT_STORE, Cause.NONE), (in_block, next_block)


@cocotb.test()
async def type3_reserved_bits_invalid(dut):
    """A Type 3 pointer with any of its reserved bits 61..54 set is of the invalid type:
    as the warp's base, or as one lane under a good base, the warp fails with cause 5; the
    same pointer with the bits clear passes."""
    tb = BcuTB(dut)
    await tb.reset()
    drv = tb.driver()
    drv.alloc_t3("t", 12)
    launch = drv.launch()
    await tb.launch(launch, precise=True)
    good = launch.ptr("t", 0x40)
    cases = []
    for bit in (RESERVED_LSB, RESERVED_LSB + 7):
        bad = good | (1 << bit)
        cases.append((_same(bad), Cause.POINTER_TYPE))
        lanes = [with_addr(good, (good & ((1 << 48) - 1)) + 4 * k) for k in range(LANES)]
        lanes[5] = bad
        cases.append((WarpRequest(good, lanes, FULL, 2, False), Cause.POINTER_TYPE))
    cases.append((_same(good | (0xFF << RESERVED_LSB)), Cause.POINTER_TYPE))
    cases.append((_same(good), Cause.NONE))
    got = [(tb.submit(req).cause, cause) for req, cause in cases]
    await tb.check_state("type 3 reserved bits")
    assert all(g is w for g, w in got), f"model causes differ from decision 5: {got}"


async def _fill_until_backpressure(tb, launch, names):
    """Submit a warp per buffer of *names*, each once the BCU took the one before, until
    ``req`` stays not ready: so every submitted warp is inside the unit (none waits in the
    testbench's source to be accepted after a launch). Returns the buffers used."""
    used = []
    for n in names:
        accepted = len(tb.accepted)
        tb.submit(_contig(launch, n))
        used.append(n)
        for _ in range(50):
            await RisingEdge(tb.clk)
            if len(tb.accepted) > accepted:
                break
        else:
            raise AssertionError(f"warp {len(used)} not accepted")
        for _ in range(4):
            await RisingEdge(tb.clk)
        await ReadOnly()
        if not int(tb.dut.req__ready.value):
            return used
        await RisingEdge(tb.clk)
    raise AssertionError(f"req still ready after {len(names)} warps behind a stalled resp")


@cocotb.test()
async def launch_with_misses_waiting(dut):
    """Slot 0's misses (every warp a buffer of its own, never looked up before) fill the
    answer queue behind a stalled ``resp``, one waits in E and more in the front, when the
    slot is launched again (same configuration). They are answered; the ones still in E
    or the front at the pulse fetch but fill nothing, the ones before had filled entries
    the launch flushes: so the same warps afterwards all miss again (the model, which
    applies the launch after them, says the same)."""
    tb = BcuTB(dut, mem_latency=(1, 4))
    await tb.reset()
    drv = tb.driver()
    names = _globals(drv, 24, size=256)
    launch = drv.launch()
    await tb.launch(launch)
    tb.resp.set_pause(itertools.repeat(True))
    used = await _fill_until_backpressure(tb, launch, names)
    assert len(used) > QUEUE_DEPTH + 1, f"only {len(used)} warps in flight: none waits in E"
    await tb.launch(launch, drain=False)
    tb.resp.set_pause(never())
    await tb.check_state("launch with misses waiting")
    misses = tb.model.misses
    again = [tb.submit(_contig(launch, n)) for n in used]
    await tb.check_state("the same warps after the launch")
    assert tb.model.misses - misses == len(used), "the model kept entries across the launch"
    assert all(r.ok and r.uops[0].level == "mem" for r in again)


# Buffers whose bases and sizes set every bit of a VA and of a size one way, then the
# other: 0x5555… against 0xAAAA…, a low one, a 4 GiB - 1 one and one whose bound passes
# 2**48 (the limit's carry bit). (name, base, size); overlaps are harmless (one id each).
_TOP = 1 << VA_BITS
_PATTERN_BUFFERS = [("low", 0x100, 0x1000),
                    *[(f"p{i}", 0x5555_5555_5555 + (i << 36), 0x5555_5555) for i in range(3)],
                    *[(f"a{i}", 0xAAAA_AAAA_AAAA - (i << 36), 0xAAAA_AAAA) for i in range(3)],
                    ("big", 0x0001_0000_0000, 0xFFFF_FFFF),
                    ("wrap", _TOP - (1 << 31), 0xFFFF_FFFF),
                    # one byte under these is 0x5555_5555_5555 / 0xAAAA_AAAA_AAAA: the logged
                    # address of a warp that starts there
                    ("log_p", 0x5555_5555_5556, 0x100), ("log_a", 0xAAAA_AAAA_AAAB, 0x100)]
_ORDER = ["low", "p0", "a0", "p1", "a1", "big", "p2", "a2", "wrap", "high", "a0", "p0", "low"]


def _pattern_driver(tb, rbt_base):
    """A driver whose RBTs are at *rbt_base*, with the buffers of ``_PATTERN_BUFFERS`` (and one
    just under the RBTs) placed by hand."""
    drv = Driver(random.Random(random.getrandbits(32)), tb.mem, rbt_base=rbt_base, lanes=LANES,
                 slots=tb.slots, va_start=0x100)
    for name, base, size in [*_PATTERN_BUFFERS, ("high", rbt_base - 0x1000, 0x1000)]:
        drv.place_global(name, base, size)
    return drv


@cocotb.test()
async def data_path_bits(dut):
    """The data-path bits random traffic leaves still (docs/coverage.md, "Data path").
    Each slot's id key goes K, ~K, K, so every key bit rises and falls; its RBT moves
    between the top of the VA space and a low base, so every bit of the fetch address
    does; buffers of complementary bases and sizes (``_PATTERN_BUFFERS``, not aligned: the
    driver aligns to 256, the BCU takes any base) are fetched, cached, queued and compared
    in turn, so every bit of lane addresses, entry bases and sizes, bounds and limits does;
    each launch's first violation is at 0x5555_5555_5555, then 0xAAAA_AAAA_AAAA, then the
    first again, for the logged address; the third launch of each slot moves its low table
    up by 256 KiB - 16 (a misaligned base, as ``misaligned_rbt_base_carries``), so bits 17..4
    of the RBT base and the fetch address rise and fall too (bits 3..0 cannot: an RBT is
    16-byte entries, docs/coverage.md). Every warp against the model: in bounds passes,
    one word over either end fails with cause 1 (the buffer past 2**48 only below its
    base), on every slot and key."""
    tb = BcuTB(dut, mem_latency=(1, 4))
    await tb.reset()
    top = _pattern_driver(tb, _TOP - tb.slots * RBT_BYTES)
    low = _pattern_driver(tb, RBT_BYTES)
    span = 4 * LANES
    mask = (1 << KEY_BITS) - 1
    got = []

    async def run(drv, slot, key, log, shift=0, order=_ORDER):
        # the previous run's warps answered first: the launch rewrites the RBT entries they
        # may still fetch (the model answered them from the old entries, at submission)
        await tb.drain()
        launch = drv.launch(slot=slot, key=key)
        if shift:       # the table moved up by *shift* bytes (bits 17..4 of the base set)
            launch = _moved(tb, launch, launch.rbt_base + shift)
        await tb.launch(launch)
        got.append((slot, log, -1, tb.submit(_contig(launch, log, -1), slot).cause, Cause.OUT_OF_BOUNDS))
        for n in order:
            size = launch.buffers[n].size
            cases = [(0, Cause.NONE), (-4, Cause.OUT_OF_BOUNDS)]
            # past 2**48 only up to its top: the last lane's last byte is 2**48 - 1
            cases += [((1 << 31) - span, Cause.NONE)] if n == "wrap" else [
                (size - span, Cause.NONE), (size - span + 4, Cause.OUT_OF_BOUNDS)]
            for first, cause in cases:
                got.append((slot, n, first, tb.submit(_contig(launch, n, first), slot).cause, cause))

    for slot in range(tb.slots):
        key = random.getrandbits(KEY_BITS)
        await run(top, slot, key, "log_p")
        await run(low, slot, ~key & mask, "log_a")
        await run(low, slot, key, "log_p", shift=RBT_BYTES - RBT_ENTRY_BYTES)
        await tb.check_state(f"data-path bits, slot {slot}")
    await run(top, 0, key, "log_a", order=["p0"])     # the moved base's low bits fall again
    await tb.check_state("data-path bits, slot 0 again")
    wrong = [g for g in got if g[3] is not g[4]]
    assert not wrong, f"model causes differ from the bounds (slot, buffer, first byte, got, want): {wrong[:4]}"


def test_bcu_corners():
    """pytest entry: the directed corner tests of bcu on Verilator."""
    from tb.common.sim import run

    run("bcu", "tb.gpushield.test_bcu_corners")
