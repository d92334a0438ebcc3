"""``bcu`` with lane counts other than the contract's 32, on the Amaranth simulator: the
front pipeline's pairing and 4-way merges with partial groups (odd lanes, a lone span) and
the extra merge level of 64 lanes. Random warps (several ids, bad types, Type 1/3,
violations, random masks and sizes), back to back and now and then into an idle unit,
random back-pressure on ``resp``; every answer against the golden model, in order."""
import random

import pytest

from hw.gpushield import BCU
from sw.gpushield.driver import Driver, run_amaranth_sim
from sw.gpushield.model import BCUModel, WarpRequest, pointer, pointer_addr


def _requests(rng, launch, lanes, count):
    bufs = list(launch.buffers.values())
    out = []
    for tag in range(count):
        base_buf = rng.choice(bufs)
        addrs = []
        for _ in range(lanes):
            b = base_buf if rng.random() < 0.6 else rng.choice(bufs)
            addrs.append(launch.ptr(b.name, rng.randrange(b.size - 7)))
        k = rng.randrange(lanes)       # now and then one lane out of bounds or forged
        roll, b = rng.random(), rng.choice(bufs)
        if roll < 0.2:
            addrs[k] = launch.ptr(b.name, rng.choice([-1, b.size - 1, b.size + 100]))
        elif roll < 0.3:
            addrs[k] = pointer(rng.randrange(4), pointer_addr(addrs[k]), rng.getrandbits(14))
        mask = rng.getrandbits(lanes) | (rng.random() < 0.5) * ((1 << lanes) - 1)
        out.append(WarpRequest(launch.ptr(base_buf.name), addrs, mask, rng.randrange(4),
                               rng.random() < 0.3, tag))
    return out


@pytest.mark.parametrize("lanes", [3, 64])
def test_lanes(lanes):
    rng = random.Random(lanes)
    drv = Driver(rng, lanes=lanes)
    for i in range(6):
        drv.alloc_global(f"g{i}", rng.choice([64, 300, 4096]), read_only=i == 0)
    drv.alloc_t3("t", 9)
    launch = drv.launch()
    model = BCUModel(drv.mem.read128, lanes)
    model.rbt_base, model.kernel_id, model.id_key = launch.rbt_base, launch.kernel_id, launch.id_key
    model.launch()      # slot 0, as the bench pulses launch
    reqs = _requests(rng, launch, lanes, 40 if lanes < 64 else 16)
    want = [model.check(r) for r in reqs]
    dut = BCU(lanes)
    got = []

    async def bench(ctx):
        ctx.set(dut.rbt_base, launch.rbt_base)
        ctx.set(dut.kernel_id, launch.kernel_id)
        ctx.set(dut.id_key, launch.id_key)
        ctx.set(dut.launch, 1)
        await ctx.tick()
        ctx.set(dut.launch, 0)
        for n, r in enumerate(reqs):
            ctx.set(dut.req.payload.as_value(), r.pack(lanes))
            ctx.set(dut.req.valid, 1)
            await ctx.tick().until(dut.req.ready)
            ctx.set(dut.req.valid, 0)
            if n % 7 == 0:        # now and then let the pipeline drain
                while len(got) <= n:
                    await ctx.tick()
        for _ in range(200):
            await ctx.tick()

    run_amaranth_sim(dut, bench, drv.mem, got, resp_ready=lambda: rng.random() < 0.7)
    assert [(g["tag"], g["ok"], g["cause"]) for g in got] == [
        (w.tag, int(w.ok), w.cause.value) for w in want]
    assert {w.ok for w in want} == {True, False}
    assert len({w.cause for w in want}) >= 2
