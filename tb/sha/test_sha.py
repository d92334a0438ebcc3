"""cocotb regression of ``sha384`` (hw/sha) against hashlib (OpenSSL) and the NIST SHAVS
byte-oriented SHA-384 files.

Expected digests come from hashlib and the SHAVS files, never from the RTL; our golden
model (sw/sha, checked against hashlib separately) only pads messages and names the
intermediates the reset-scrub scan looks for.
"""
import hashlib
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from sw.cavp import open_rsp, parse_rsp
from sw.sha import blocks
from tb.common.scrub import Scanner
from tb.common.stream import TransferLog, never, random_pause
from tb.sha.env import CYCLES_PER_BLOCK, LATENCY, SHAVS_FILES, ShaTB, sha_secrets

# ports the testbench drives, left out of the reset-scrub scan
DRIVEN = ("i__", "o__ready", "clk", "rst")


def random_messages(count, longest=700):
    # lengths around the padding boundaries (111/112 bytes mod 128) come up often
    edges = [0, 1, 110, 111, 112, 113, 127, 128, 129, 239, 240, 255, 256]
    return [random.randbytes(random.choice(edges) if random.random() < 0.3 else random.randrange(longest + 1))
            for _ in range(count)]


@cocotb.test()
async def fips180_examples(dut):
    """FIPS 180-4's "abc" (one block) and its two-block example message, then the empty
    message: the digests from the standard's examples."""
    tb = ShaTB(dut)
    await tb.reset()
    messages = [b"abc", b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                b"klmnopqrlmnopqrsmnopqrstnopqrstu", b""]
    expected = [bytes.fromhex(x) for x in (
        "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
        "09330c33f71147e83d192fc782cd1b4753111b173b3b05d22fa08086e3b0f712fcc7c71a557e2db966c3e9fa91746039",
        "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b")]
    await tb.check(messages, "FIPS 180-4 examples", expected)


@cocotb.test()
async def shavs(dut):
    """Every record of the SHAVS SHA-384 ShortMsg and LongMsg files (byte oriented), all
    messages back to back."""
    tb = ShaTB(dut)
    await tb.reset()
    for name in SHAVS_FILES:
        records = list(parse_rsp(open_rsp("hashes", "SHA2", name)))
        assert len(records) >= 128, f"{name}: {len(records)} records read"
        messages = [bytes.fromhex(r["MSG"])[:int(r["LEN"]) // 8] for r in records]
        await tb.check(messages, name, [bytes.fromhex(r["MD"]) for r in records])
        tb.log.info("%s: %d messages checked", name, len(records))


def stall_bursts(longest=4 * CYCLES_PER_BLOCK):
    """Back-pressure in bursts of up to *longest* cycles: long enough for the next digest
    to be ready while ``o`` still holds one (random per-cycle stalls almost never are)."""
    while True:
        yield from [True] * random.randrange(longest) + [False] * random.randrange(1, 8)


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.5], stall=[0.0, 0.7, "bursts"])
async def random_stream(dut, idle, stall):
    """Random messages of random lengths against hashlib, with random idle cycles between
    the input's blocks and random back-pressure on the output (per cycle, or in bursts)."""
    tb = ShaTB(dut)
    tb.source.set_pause(random_pause(idle) if idle else never())
    tb.sink.set_pause(stall_bursts() if stall == "bursts" else random_pause(stall) if stall else never())
    await tb.reset()
    await tb.check(random_messages(40), f"random idle={idle} stall={stall}")
    await tb.cycles(LATENCY + CYCLES_PER_BLOCK)
    assert not tb.sink.queue, f"{len(tb.sink.queue)} unexpected extra digests"


@cocotb.test()
async def output_held(dut):
    """A digest no one takes stays on ``o`` unchanged, the engine finishes the next
    message's rounds and waits: no digest is lost or duplicated when ``o`` frees up."""
    tb = ShaTB(dut)
    await tb.reset()
    tb.sink.enabled = False
    messages = random_messages(3, longest=300)
    for msg in messages:
        tb.send(msg)
    await tb.cycles(20 * CYCLES_PER_BLOCK)
    await ReadOnly()
    assert int(dut.o__valid.value), "no digest waiting after 20 blocks' time"
    held = int(dut.o__payload.value)
    assert held.to_bytes(48, "little") == hashlib.sha384(messages[0]).digest()
    assert not tb.source.empty(), "every block went in although the output was never taken"
    await RisingEdge(tb.clk)
    tb.sink.enabled = True
    for n, msg in enumerate(messages):
        got = await tb.recv()
        assert got == hashlib.sha384(msg).digest(), f"message {n} after the output was freed"
    await tb.cycles(LATENCY + CYCLES_PER_BLOCK)
    assert not tb.sink.queue, "a digest came out twice"


@cocotb.test()
async def back_to_back(dut):
    """With every block offered at once and ``o`` always ready, the engine takes a block
    exactly every ``cycles_per_block`` cycles, across message boundaries too (no idle cycle
    between messages), and each digest leaves ``latency`` cycles after its last block."""
    tb = ShaTB(dut)
    await tb.reset()
    log = TransferLog(dut, tb.clk, "i", "o")
    await RisingEdge(tb.clk)
    messages = random_messages(12, longest=400)
    counts = [len(blocks(m)) for m in messages]
    await tb.check(messages, "back to back")
    log.stop()
    taken, left = log.cycles["i"], log.cycles["o"]
    assert len(taken) == sum(counts) and len(left) == len(messages)
    gaps = {b - a for a, b in zip(taken, taken[1:])}
    assert gaps == {CYCLES_PER_BLOCK}, f"blocks taken at gaps {sorted(gaps)}, not {CYCLES_PER_BLOCK}"
    ends = [taken[sum(counts[:n + 1]) - 1] for n in range(len(messages))]
    latencies = {o - i for i, o in zip(ends, left)}
    assert latencies == {LATENCY}, f"latencies {sorted(latencies)}, not SHA384().latency = {LATENCY}"


@cocotb.test()
async def first_restarts(dut):
    """A block with ``first`` starts from the initial hash value whatever came before: a
    message cut off without ``last`` leaves no trace in the next message's digest."""
    tb = ShaTB(dut)
    await tb.reset()
    cut = random.randbytes(300)
    tb.send(cut, last=False)
    await tb.check(random_messages(3), "after a message without last")


@cocotb.test()
async def reset_midmessage(dut):
    """Reset in the middle of a long message: as a control, before the reset the scan
    finds schedule words, working variables and chaining values of that message in the
    engine; in the first cycle after the reset every register of the design reads zero
    (and so none of those), nothing from before the reset comes out after it, and the
    messages after it hash correctly."""
    tb = ShaTB(dut)
    tb.sink.set_pause(random_pause(0.3))
    await tb.reset()
    scanner = Scanner(dut, skip=DRIVEN)
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    secret = random.randbytes(1500)          # 12 blocks
    secrets = sha_secrets(secret, "secret")
    tb.send(secret)
    await scanner.control(secrets, tb.clk, 6 * CYCLES_PER_BLOCK, need={"W", "state", "H"}, every=7)
    await RisingEdge(tb.clk)
    assert not tb.source.empty(), "the whole message went in before the reset"
    tb.source.clear()
    dut.rst.value = 1
    await RisingEdge(tb.clk)
    dut.rst.value = 0
    tb.sink.clear()
    await ReadOnly()
    scan = scanner.assert_clean(secrets, "in the first cycle after the reset")
    nonzero = sorted(path for path, (_, value) in scan.values.items() if value)
    assert not nonzero, f"after the reset these registers are not zero: {', '.join(nonzero[:12])}"
    tb.log.info("after the reset: %d values (%d bits) read, all zero", len(scan.values), scan.bits())
    await RisingEdge(tb.clk)
    await tb.cycles(LATENCY + CYCLES_PER_BLOCK)
    assert not tb.sink.queue, f"{len(tb.sink.queue)} digests from before the reset came out after it"
    await tb.check(random_messages(6), "after reset")


def test_sha384():
    """pytest entry: the whole cocotb regression of sha384 on Verilator."""
    from tb.common.sim import run

    run("sha384", "tb.sha.test_sha")
