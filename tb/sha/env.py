"""The ``sha384`` test environment (tb/sha/test_sha.py runs the tests).

:class:`ShaTB` pads messages into blocks (``first`` on the first, ``last`` on the last),
drives ``i``, takes ``o`` and compares each digest in order with hashlib's SHA-384 (OpenSSL),
never with the RTL or our own golden model. The golden model (sw/sha, checked against
hashlib by sw/sha/test_model.py) gives only what hashlib cannot: the padding and the
intermediates the reset-scrub scan searches for (:func:`sha_secrets`).
"""
import hashlib

from cocotb.triggers import ClockCycles

from hw.sha import SHA384
from hw.sha.layout import input_layout, output_layout
from sw.sha import IV, blocks, trace
from tb.common.payload import pack, unpack
from tb.common.scrub import int_secret
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

__all__ = ["ShaTB", "sha_secrets", "SHAVS_FILES", "IN_LAYOUT", "OUT_LAYOUT", "CYCLES_PER_BLOCK", "LATENCY"]

SHAVS_FILES = ["SHA384ShortMsg.rsp", "SHA384LongMsg.rsp"]
IN_LAYOUT, OUT_LAYOUT = input_layout(), output_layout()
_SHA = SHA384()
CYCLES_PER_BLOCK = _SHA.cycles_per_block
LATENCY = _SHA.latency


class ShaTB(TB):
    """``i`` driven with the padded blocks of whole messages, ``o`` taken in order."""

    def __init__(self, dut):
        super().__init__(dut)
        self.source = StreamSource(dut, "i", self.clk)
        self.sink = StreamSink(dut, "o", self.clk)

    def send_block(self, block: bytes, first: bool, last: bool):
        self.source.send(pack(IN_LAYOUT, block=int.from_bytes(block, "little"),
                              first=int(first), last=int(last)))

    def send(self, message: bytes, last=True):
        """Queue *message*'s padded blocks (without ``last`` on its final block when *last*
        is False: a message cut off, never finished). Returns the number of blocks."""
        padded = blocks(message)
        for n, block in enumerate(padded):
            self.send_block(block, n == 0, last and n == len(padded) - 1)
        return len(padded)

    async def recv(self, timeout_cycles=20_000) -> bytes:
        payload = unpack(OUT_LAYOUT, await self.sink.recv(timeout_cycles))
        return payload["digest"].to_bytes(48, "little")

    async def check(self, messages, what, expected=None):
        """Send *messages* back to back and compare the digests in order with hashlib's
        (or with *expected*, e.g. the SHAVS digests)."""
        if expected is None:
            expected = [hashlib.sha384(msg).digest() for msg in messages]
        for msg in messages:
            self.send(msg)
        for n, (msg, want) in enumerate(zip(messages, expected)):
            count = len(blocks(msg))
            if not self.sink.queue:
                # a message's digest cannot leave sooner than its blocks' rounds after the
                # previous one: wait that long in one trigger rather than a poll per cycle
                await ClockCycles(self.clk, CYCLES_PER_BLOCK * count - 1)
            got = await self.recv(timeout_cycles=CYCLES_PER_BLOCK * (count + 4) + 20_000)
            assert got == want, (f"{what}: message {n} ({len(msg)} bytes, {msg[:16].hex()}…): "
                                 f"RTL gave {got.hex()}, expected {want.hex()}")


def sha_secrets(message: bytes, label="msg"):
    """What hashing *message* leaves in the engine, as needles for tb.common.scrub: every
    schedule word W[0..79] of every block ("W"; W[0..15] are the block itself), the working
    variables a and e after every round ("state"; b–d and f–h are earlier a and e), and the
    chaining value after every block ("H"). Words are 64-bit values held with bit 0 in bit 0
    of a register, so their bytes are in little-endian order."""
    out, state = [], IV
    for n, block in enumerate(blocks(message)):
        tr = trace(state, block)
        out += [int_secret("W", f"{label} block {n} W[{t}]", x, 8) for t, x in enumerate(tr.w)]
        for t, v in enumerate(tr.rounds):
            out += [int_secret("state", f"{label} block {n} round {t} a", v[0], 8),
                    int_secret("state", f"{label} block {n} round {t} e", v[4], 8)]
        out += [int_secret("H", f"{label} H after block {n} [{j}]", x, 8) for j, x in enumerate(tr.out)]
        state = tr.out
    return out
