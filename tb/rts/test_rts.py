"""cocotb regression of ``rts`` (hw/rts, ``MeasurementStore``) on Verilator.

Responses and reads are compared with the golden model (sw/rts, SHA-384 from hashlib, its
own tests in sw/rts/test_model.py); the directed tests state their expected values
independently of it: extend chains from hashlib directly, the owner lock and the reset
scrub from the contract (docs/rts.md). Timing is compared with the RTL's own constants
(``extend_latency``, ``refuse_latency``, ``scrub_cycles``), which docs/rts.md states.
"""
import hashlib
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.rts import Status
from sw.rts import SlotState
from tb.common.stream import TransferLog, never, random_pause

from .env import RtsTB


def _value():
    return random.randbytes(48)


@cocotb.test()
async def extend_chain(dut):
    """A chain of extends of one slot, read after each: the value is the hashlib chain
    SHA-384(…SHA-384(0⁴⁸ ‖ v1)… ‖ vn), the owner the extender, the count n; the first and
    last slots too; the other slots stay zero."""
    tb = RtsTB(dut)
    await tb.reset()
    await tb.wait_ready()
    for slot in (0, 5, tb.slots - 1):
        chain = bytes(48)
        for n in range(1, 5):
            v = _value()
            tb.extend(slot, 3, v)
            await tb.check_responses(f"slot {slot} extend {n}")
            chain = hashlib.sha384(chain + v).digest()
            got = await tb.read(slot)
            assert got == SlotState(chain, 3, True, n), f"slot {slot} after {n} extends: {got}"
    for slot in (1, 2, tb.slots - 2):
        assert await tb.read(slot) == SlotState(), f"slot {slot} changed without an extend"


@cocotb.test()
async def owner_lock(dut):
    """The first extend binds a slot; another owner's extend is refused (REFUSED_OWNER),
    leaves the slot as it was and counts in ``refused``; the binding owner still extends;
    a free slot binds to whoever extends it first."""
    tb = RtsTB(dut)
    await tb.reset()
    await tb.wait_ready()
    a, b = _value(), _value()
    assert tb.extend(7, 1, a) is Status.OK
    await tb.check_responses("bind")
    bound = await tb.read(7)
    assert bound == SlotState(hashlib.sha384(bytes(48) + a).digest(), 1, True, 1)
    for n, owner in enumerate((2, 0, 255), 1):
        assert tb.extend(7, owner, b) is Status.REFUSED_OWNER
        await tb.check_responses(f"owner {owner}")
        assert await tb.read(7) == bound, f"owner {owner}'s refused extend changed the slot"
        assert int(dut.refused.value) == n, f"refused = {int(dut.refused.value)} after {n} refusals"
    assert tb.extend(7, 1, b) is Status.OK
    await tb.check_responses("owner again")
    assert await tb.read(7) == SlotState(hashlib.sha384(bound.value + b).digest(), 1, True, 2)
    assert tb.extend(8, 2, b) is Status.OK
    await tb.check_responses("free slot")
    assert (await tb.read(8)).owner == 2


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.5], stall=[0.0, 0.7])
async def random_stream(dut, idle, stall):
    """Random extends (few slots, so that they collide; four owners, so that many are
    refused) back to back, with random idle cycles on the request ports and back-pressure
    on both response ports, and reads of random slots while extends run: every response
    equals the model's, every overlapping read shows one of its slot's states and never an
    older one; at the end every slot read alone equals the model, and ``refused`` too."""
    tb = RtsTB(dut)
    tb.ext.set_pause(random_pause(idle) if idle else never())
    tb.rd.set_pause(random_pause(idle) if idle else never())
    tb.resp.set_pause(random_pause(stall) if stall else never())
    tb.rd_resp.set_pause(random_pause(stall) if stall else never())
    await tb.reset()
    await tb.wait_ready()
    slots = random.sample(range(tb.slots), 6)
    statuses = [tb.extend(random.choice(slots), random.randrange(4), _value()) for _ in range(40)]
    assert Status.REFUSED_OWNER in statuses and Status.OK in statuses
    reads = [random.choice(slots) for _ in range(60)]

    async def reader():
        for n, slot in enumerate(reads):
            tb.read_request(slot)
            got = await tb.read_result()
            tb.check_overlapping_read(slot, got, f"read {n}")
            await tb.cycles(random.randrange(120))
    task = cocotb.start_soon(reader())
    await tb.check_responses(f"random idle={idle} stall={stall}")
    await task
    for slot in range(tb.slots):
        assert await tb.read(slot) == tb.model.read(slot), f"slot {slot} at the end"
    assert int(dut.refused.value) == tb.model.refused


@cocotb.test()
async def timing(dut):
    """With nothing held back, an extend's response is valid ``extend_latency`` cycles after
    it was taken (a refused one ``refuse_latency``), the next extend is taken the cycle after
    the response, and a read answers in the next cycle."""
    tb = RtsTB(dut)
    await tb.reset()
    await tb.wait_ready()
    log = TransferLog(dut, tb.clk, "extend", "resp", "rd", "rd_resp")
    await RisingEdge(tb.clk)
    for _ in range(3):
        tb.extend(2, 1, _value())
    tb.extend(2, 9, _value())
    await tb.check_responses("timing")
    tb.read_request(2)
    await tb.read_result()
    await tb.cycles(2)
    log.stop()
    taken, answered = log.cycles["extend"], log.cycles["resp"]
    latencies = [r - t for t, r in zip(taken, answered)]
    rtl = tb.rtl
    assert latencies == [rtl.extend_latency] * 3 + [rtl.refuse_latency], f"latencies {latencies}"
    assert [t - r for r, t in zip(answered, taken[1:])] == [1, 1, 1], f"taken {taken}, answered {answered}"
    assert [r - t for t, r in zip(log.cycles["rd"], log.cycles["rd_resp"])] == [rtl.read_latency]


@cocotb.test()
async def reset_scrub(dut):
    """Cold reset with slots bound and extended, refusals counted and an extend in flight:
    ``ready`` is low for ``scrub_cycles`` cycles and no request is taken meanwhile; then
    every slot reads zero, unbound, count 0 through the read port; ``refused`` is zero;
    the extend in flight is never answered; a bound slot is free to any owner again."""
    tb = RtsTB(dut)
    await tb.reset()
    await tb.wait_ready()
    # slot 0 is extended during the scrub below; the last slot is the walk's last write
    used = [tb.slots - 1, *random.sample(range(1, tb.slots - 1), 7)]
    for slot in used:
        tb.extend(slot, 1, _value())
    tb.extend(used[0], 2, _value())                 # refused
    await tb.check_responses("before the reset")
    for slot in used:
        assert (await tb.read(slot)).bound, "control: the slot was not bound before the reset"
    assert int(dut.refused.value) == 1
    tb.extend(used[1], 1, _value())                 # in flight at the reset
    await tb.cycles(30)
    tb.ext.clear()
    tb.resp.clear()
    tb.reset_model()
    # the reset, then count the cycles with `ready` low and check that nothing is taken
    dut.rst.value = 1
    await RisingEdge(tb.clk)
    dut.rst.value = 0
    tb.ext.send(0)                                  # offered all through the scrub
    tb.rd.send(0)
    low = 0
    while True:
        await ReadOnly()
        if int(dut.ready.value):
            break
        assert not int(dut.extend__ready.value) and not int(dut.rd__ready.value), \
            f"a request port open in scrub cycle {low}"
        low += 1
        await RisingEdge(tb.clk)
    assert low == tb.rtl.scrub_cycles, f"ready low for {low} cycles, not scrub_cycles = {tb.rtl.scrub_cycles}"
    assert int(dut.refused.value) == 0
    await RisingEdge(tb.clk)
    tb.model.extend(0, 0, bytes(48))                # the zero extend offered during the scrub
    tb.expected.append((0, Status.OK))
    await tb.check_responses("the extend offered during the scrub")
    got = await tb.read_result()                    # the read offered during the scrub
    assert got == SlotState(), f"slot 0 read in the first cycle after the scrub: {got}"
    for slot in range(1, tb.slots):
        got = await tb.read(slot)
        assert got == SlotState(), f"slot {slot} after the reset: {got}"
    assert tb.extend(used[0], 2, _value()) is Status.OK
    await tb.check_responses("a formerly bound slot")
    assert (await tb.read(used[0])).owner == 2
    assert not tb.resp.queue, "a response from before the reset came out after it"


def test_rts():
    """pytest entry: the whole cocotb regression of rts on Verilator."""
    from tb.common.sim import run

    run("rts", "tb.rts.test_rts")
