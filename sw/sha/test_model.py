"""The SHA-384 golden model against hashlib (OpenSSL) and the NIST SHAVS byte-oriented
SHA-384 files."""
import hashlib
import random

import pytest

from sw.cavp import open_rsp, parse_rsp
from sw.sha import BLOCK_BYTES, IV, K, blocks, compress, digest, pad, schedule, sha384, trace


def test_constants_spot_values_from_fips180_4():
    # FIPS 180-4 § 4.2.3 (first and last K) and § 5.3.4 (first and last IV word)
    assert K[0] == 0x428A2F98D728AE22 and K[79] == 0x6C44198C4A475817
    assert IV[0] == 0xCBBB9D5DC1059ED8 and IV[7] == 0x47B5481DBEFA4FA4


@pytest.mark.parametrize("length", [0, 1, 111, 112, 127, 128, 239, 240, 1000])
def test_padding_boundaries_against_hashlib(length):
    message = random.randbytes(length)
    assert len(pad(message)) % BLOCK_BYTES == 0
    assert sha384(message) == hashlib.sha384(message).digest()


def test_random_messages_against_hashlib():
    rng = random.Random(1)
    for _ in range(300):
        message = rng.randbytes(rng.randrange(0, 700))
        assert sha384(message) == hashlib.sha384(message).digest(), message.hex()


@pytest.mark.parametrize("name", ["SHA384ShortMsg.rsp", "SHA384LongMsg.rsp"])
def test_shavs(name):
    records = list(parse_rsp(open_rsp("hashes", "SHA2", name)))
    assert len(records) >= 128
    for r in records:
        message = bytes.fromhex(r["MSG"])[:int(r["LEN"]) // 8]
        assert sha384(message) == bytes.fromhex(r["MD"]), r["LEN"]


def test_trace_agrees_with_compress_and_the_schedule():
    block = random.randbytes(BLOCK_BYTES)
    t = trace(IV, block)
    assert t.out == compress(IV, block) and list(t.w) == schedule(block)
    assert t.rounds[-1][1] == t.rounds[-2][0]       # b after a round is a before it


def test_bad_input_rejected():
    with pytest.raises(ValueError):
        schedule(bytes(127))
    with pytest.raises(ValueError):
        compress(IV[:7], bytes(128))
    assert len(blocks(b"")) == 1 and len(digest(IV)) == 48
