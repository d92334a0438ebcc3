"""The non-blocking RCache engine (hw/gpushield/engine.py) alone, on the Amaranth simulator:
what a launch of a slot does to its fetches in flight, which the cocotb regression cannot
drive against the golden model (the model applies a launch between two requests).

Every case checks what the engine's documented rules say (docs/gpushield.md, decisions 3
and 8), with a different RBT word for every fetch, so an answer carrying the wrong fetch's
entry shows:

- a launch while a miss's fetch is outstanding: the miss is answered (with its fetch), the
  flushed entry is not filled, the next lookup of that id misses again;
- a launch, then a new miss of the same id while the old fetch is outstanding (the L1 way
  and L2 entry reallocated): the old fetch's answer does not fill the new pending entry;
  a hit on that entry waits for the new fetch and is answered with its word;
- a lookup waiting in E on a pending entry when its slot launches: it becomes a stale
  miss, fetches without allocating, and the id misses again afterwards;
- another slot's entry with the same encrypted id is untouched by the launch;
- a stale miss's fetch does not fill the L2 entry that the next miss allocates.
"""
from amaranth.sim import Simulator

from hw.gpushield.engine import Engine
from hw.gpushield.layout import cache_entry_layout, check_layout, mem_resp_layout, uop_layout
from sw.common.payload import pack, unpack
from sw.gpushield.model import pack_entry


def test_launch_during_fetches():
    dut = Engine(lanes=1, slots=2)
    uop, out_layout = uop_layout(1), check_layout(1)
    outs, fetches = [], []
    counters = {}

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.mem_req.ready, 1)

        async def cycle():
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                outs.append(unpack(out_layout, ctx.get(dut.o.payload.as_value()), enums=False))
            if ctx.get(dut.mem_req.valid) and ctx.get(dut.mem_req.ready):
                fetches.append(ctx.get(dut.mem_req.payload.addr))
            taken = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            answered = ctx.get(dut.mem_resp.valid) and ctx.get(dut.mem_resp.ready)
            await ctx.tick()
            if taken:
                ctx.set(dut.i.valid, 0)
            if answered:
                ctx.set(dut.mem_resp.valid, 0)
            return taken, answered

        async def cycles(n):
            for _ in range(n):
                await cycle()

        async def send(eid, slot=0, tag=0):
            ctx.set(dut.i.payload.as_value(), pack(uop, lookup=1, eid=eid, dec_part=eid, slot=slot, tag=tag,
                                                   last=1, hi=0x1000, lo=0x1000))
            ctx.set(dut.i.valid, 1)
            for _ in range(200):
                taken, _ = await cycle()
                if taken:
                    return
            raise AssertionError(f"micro-op {tag} not taken")

        async def answer(base):
            ctx.set(dut.mem_resp.payload.as_value(), pack(mem_resp_layout, data=pack_entry(base, 64)))
            ctx.set(dut.mem_resp.valid, 1)
            for _ in range(200):
                _, answered = await cycle()
                if answered:
                    return
            raise AssertionError(f"memory answer {base:#x} not taken")

        async def launch(slot):
            ctx.set(dut.launch, 1 << slot)
            await cycle()
            ctx.set(dut.launch, 0)

        while ctx.get(dut.scrubbing):
            await ctx.tick()
        # 1. launch while the fetch is outstanding
        await send(5, tag=1)
        await cycles(4)
        assert len(fetches) == 1
        await launch(0)
        await answer(0xA000)
        await send(5, tag=2)
        await cycles(4)
        assert len(fetches) == 2, "a flushed entry was filled by the fetch in flight at the launch"
        await answer(0xB000)
        await cycles(3)
        # 2. reallocated entry: the old fetch's answer must not fill it
        await send(7, tag=3)
        await cycles(4)
        await launch(0)
        await send(7, tag=4)                # misses again: a new fetch, a new pending entry
        await send(7, tag=5)                # hits the pending entry: waits in E
        await cycles(4)
        assert len(fetches) == 4
        await answer(0xC000)                # the old fetch (tag 3)
        await cycles(6)
        assert [o["tag"] for o in outs[2:]] == [3], f"answers after the old fetch: {outs[2:]}"
        await answer(0xD000)                # the new fetch (tag 4)
        await cycles(4)
        # 3. a lookup waiting on a pending entry when its slot launches
        await send(9, tag=6)
        await send(9, tag=7)                # waits for tag 6's fill
        await cycles(3)
        assert len(fetches) == 5
        await launch(0)
        await cycles(4)
        assert len(fetches) == 6, "the waiting lookup did not become a miss after the launch"
        await answer(0xE000)
        await answer(0xF000)
        await cycles(3)
        await send(9, tag=8)
        await cycles(4)
        assert len(fetches) == 7, "the stale miss allocated an entry (or the flushed one was filled)"
        await answer(0x1_0000)
        await cycles(3)
        # 4. another slot's entry of the same encrypted id survives slot 0's launch
        await send(9, slot=1, tag=9)
        await cycles(4)
        await answer(0x2_0000)
        await send(9, slot=1, tag=10)
        await launch(0)
        await send(9, slot=1, tag=11)
        await cycles(8)
        assert len(fetches) == 8, "slot 1's entry was flushed by slot 0's launch"
        # 5. a stale miss's fetch must not fill the L2 entry the next miss allocates
        await send(20, tag=12)              # miss A
        await send(20, tag=13)              # waits on A's entry
        await cycles(2)
        await launch(0)                     # tag 13: a stale miss S, allocating nothing
        await cycles(3)
        await send(21, tag=14)              # miss N: the L2 entry S would have had
        await cycles(4)
        assert len(fetches) == 11
        for base in (0x3_0000, 0x4_0000, 0x5_0000):     # A, S, N
            await answer(base)
        for k, eid in enumerate(range(22, 30)):         # evict id 21 from L1
            await send(eid, tag=15 + k)
            await cycles(4)
            await answer(0x10_0000 + k)
        await send(21, tag=23)              # an L2 hit: N's entry
        await cycles(6)
        for name in ("l1_hits", "l2_hits", "misses"):
            counters[name] = ctx.get(getattr(dut, name))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    got = [(o["tag"], unpack(cache_entry_layout, o["entry"])["base"]) for o in outs]
    want = [(1, 0xA000), (2, 0xB000), (3, 0xC000), (4, 0xD000), (5, 0xD000), (6, 0xE000),
            (7, 0xF000), (8, 0x1_0000), (9, 0x2_0000), (10, 0x2_0000), (11, 0x2_0000),
            (12, 0x3_0000), (13, 0x4_0000), (14, 0x5_0000)]
    want += [(15 + k, 0x10_0000 + k) for k in range(8)] + [(23, 0x5_0000)]
    assert got == want, got
    # misses: tags 1-4, 6, 7 (stale), 8, 9, 12, 13 (stale), 14, 15-22; L1 hits: 5 (after
    # waiting), 10, 11; L2 hit: 23
    assert counters == {"l1_hits": 3, "l2_hits": 1, "misses": 19}, counters
