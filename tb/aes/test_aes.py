"""cocotb regression of ``aes256`` (hw/aes) against OpenSSL through ``cryptography``.

Expected values come from OpenSSL (AES-256-ECB) and the NIST CAVP files, never from the
RTL or from our own golden model, which is checked separately (sw/aes/test_model.py).
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from sw.cavp import open_rsp, parse_rsp
from tb.aes.env import CAVP_FILES, FLUSH, LATENCY, AesTB, openssl_encrypt
from tb.common.scrub import Refusals, Scanner, aes_key_secrets
from tb.common.stream import TransferLog, never, random_pause


@cocotb.test()
async def fips197_c3(dut):
    """FIPS-197 appendix C.3, the AES-256 example."""
    tb = AesTB(dut)
    await tb.reset()
    key = bytes(range(32))
    pt = bytes.fromhex("00112233445566778899aabbccddeeff")
    await tb.check([(key, pt, bytes.fromhex("8ea2b7ca516745bfeafc49904b496089"))], "FIPS-197 C.3")


@cocotb.test()
async def cavp_ecb_kat(dut):
    """Every record of the four CAVP AES-256 ECB known-answer files, back to back."""
    tb = AesTB(dut)
    await tb.reset()
    total = 0
    for name in CAVP_FILES:
        records = list(parse_rsp(open_rsp("ciphers", "AES", "ECB", name)))
        pairs = [(bytes.fromhex(r["KEY"]), bytes.fromhex(r["PLAINTEXT"]), bytes.fromhex(r["CIPHERTEXT"]))
                 for r in records]
        assert pairs, f"{name}: no records read"
        await tb.check(pairs, name)
        total += len(pairs)
    tb.log.info("CAVP ECB KAT: %d records checked", total)


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.5])
async def random_stream(dut, idle, stall):
    """Random keys and blocks, a new key every block, against OpenSSL, with random idle
    cycles on the input and random back-pressure on the output. The loaded case carries
    10,000 pairs; the others 1,000 each."""
    tb = AesTB(dut)
    count = 10_000 if (idle and stall) else 1_000
    tb.source.set_pause(random_pause(idle) if idle else never())
    tb.sink.set_pause(random_pause(stall) if stall else never())
    await tb.reset()
    pairs = []
    for _ in range(count):
        key, block = random.randbytes(32), random.randbytes(16)
        pairs.append((key, block, openssl_encrypt(key, block)))
    await tb.check(pairs, f"random idle={idle} stall={stall}")
    assert not tb.sink.queue, f"{len(tb.sink.queue)} unexpected extra outputs"


@cocotb.test()
async def fixed_latency(dut):
    """With the output always ready, every block leaves exactly LATENCY cycles after it
    entered, one per cycle, in order (a functional property, not a timing benchmark)."""
    tb = AesTB(dut)
    await tb.reset()
    while not int(dut.i__ready.value):  # the post-reset scrub
        await RisingEdge(tb.clk)
    log = TransferLog(dut, tb.clk, "i", "o")
    await RisingEdge(tb.clk)  # the log is waiting on the next edge before anything is sent
    entered, left = log.cycles["i"], log.cycles["o"]
    pairs = []
    for _ in range(64):
        key, block = random.randbytes(32), random.randbytes(16)
        pairs.append((key, block, openssl_encrypt(key, block)))
    await tb.check(pairs, "fixed latency")
    assert len(entered) == len(left) == 64
    latencies = {b - a for a, b in zip(entered, left)}
    assert latencies == {LATENCY}, f"latencies {sorted(latencies)} differ from AES256().latency = {LATENCY}"
    assert entered == list(range(entered[0], entered[0] + 64)), "input did not accept one block per cycle"


@cocotb.test()
async def reset_midstream(dut):
    """Reset in the middle of a stream: nothing sent before the reset comes out after it,
    input is refused for exactly ``AES256.flush_cycles`` cycles while zeros flush the
    pipeline, and afterwards no signal holds a word of the old key or of any of its round
    keys (before the reset, as a control, the same scan finds the key and every round key
    2..14 in the live pipeline) — read in the first cycle the input is ready again, before
    idle cycles could finish a flush cut short. The stream after the reset is correct."""
    tb = AesTB(dut)
    tb.sink.set_pause(random_pause(0.3))
    refusals = Refusals(tb.clk, dut.rst, dut.i__ready)
    await tb.reset()
    got = await refusals.after_reset()
    assert got == FLUSH, f"input refused for {got} cycles after the first reset, not flush_cycles = {FLUSH}"
    scanner = Scanner(dut, skip=("i__",))
    await ReadOnly()
    scanner.baseline()                  # the flushed pipeline: no secret has entered yet
    await RisingEdge(tb.clk)
    scans = []                          # read in the first cycle the input is ready again
    refusals.on_ready = lambda: scans.append(scanner.scan())
    secret = random.randbytes(32)
    secrets = aes_key_secrets(secret)
    for _ in range(3 * LATENCY):
        tb.send(secret, random.randbytes(16))
    # the control: with blocks under `secret` flowing, the scan finds the key and every
    # expanded round key in the stage registers (so the byte order of the needles is right)
    await scanner.control(secrets, tb.clk, 6 * LATENCY, need={s.kind for s in secrets})
    await RisingEdge(tb.clk)
    assert tb.source.queue, "every block went in before the reset: the pipeline may be empty"
    tb.source.clear()
    dut.rst.value = 1
    await RisingEdge(tb.clk)
    dut.rst.value = 0
    tb.sink.clear()
    for _ in range(FLUSH):
        await ReadOnly()
        assert not int(dut.o__valid.value), "output valid during the post-reset flush"
        await RisingEdge(tb.clk)
    got = await refusals.after_reset()
    tb.log.info("input refused for %d cycles after reset (flush)", got)
    assert got == FLUSH, f"input refused for {got} cycles after reset, not flush_cycles = {FLUSH}"
    await RisingEdge(tb.clk)
    assert not tb.sink.queue, f"{len(tb.sink.queue)} blocks from before the reset came out after it"
    scanner.assert_clean(secrets, "when the input was ready after the reset", scans[-1])
    pairs = []
    for _ in range(200):
        key, block = random.randbytes(32), random.randbytes(16)
        pairs.append((key, block, openssl_encrypt(key, block)))
    await tb.check(pairs, "after reset")


def test_aes256():
    """pytest entry: the whole cocotb regression of aes256 on Verilator."""
    from tb.common.sim import run

    run("aes256", "tb.aes.test_aes")
