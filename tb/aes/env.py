"""The ``aes256`` test environment (tb/aes/test_aes.py runs the tests).

:class:`AesTB` drives ``i`` (a block and its key), takes ``o`` and compares outputs in
order with expected blocks the caller supplies; :func:`openssl_encrypt` is the reference
(OpenSSL through ``cryptography``), never the RTL or our own golden model.
"""
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from hw.aes import AES256
from hw.aes.layout import input_layout, output_layout
from tb.common.payload import pack, unpack
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

__all__ = ["AesTB", "openssl_encrypt", "CAVP_FILES", "IN_LAYOUT", "OUT_LAYOUT", "LATENCY", "FLUSH"]

CAVP_FILES = ["ECBGFSbox256.rsp", "ECBKeySbox256.rsp", "ECBVarKey256.rsp", "ECBVarTxt256.rsp"]
IN_LAYOUT, OUT_LAYOUT = input_layout(), output_layout()
_AES = AES256()
LATENCY = _AES.latency
FLUSH = _AES.flush_cycles           # cycles the input is refused after reset (the RTL's own)


def openssl_encrypt(key: bytes, block: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


class AesTB(TB):
    """``i`` driven with (key, block) pairs, ``o`` taken in order and compared."""

    def __init__(self, dut):
        super().__init__(dut)
        self.source = StreamSource(dut, "i", self.clk)
        self.sink = StreamSink(dut, "o", self.clk)

    def send(self, key: bytes, block: bytes):
        self.source.send(pack(IN_LAYOUT, block=int.from_bytes(block, "little"),
                              key=int.from_bytes(key, "little")))

    async def recv(self) -> bytes:
        payload = unpack(OUT_LAYOUT, await self.sink.recv())
        return payload["block"].to_bytes(16, "little")

    async def check(self, pairs, what):
        """Send (key, block, expected) triples and compare the outputs in order."""
        for key, block, _ in pairs:
            self.send(key, block)
        for n, (key, block, expected) in enumerate(pairs):
            got = await self.recv()
            assert got == expected, (f"{what}: block {n}: key {key.hex()} pt {block.hex()}: "
                                     f"RTL gave {got.hex()}, OpenSSL/CAVP {expected.hex()}")
