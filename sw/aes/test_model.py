"""The AES-256 golden model against independent references: FIPS-197 (appendix A.3 key
expansion, appendix C.3 cipher example), the NIST CAVP ECB known-answer files and OpenSSL
through ``cryptography``."""
import random

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from sw.aes import SBOX, encrypt_block, encrypt_int, expand_key
from sw.cavp import open_rsp, parse_rsp

FIPS_KEY_A3 = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")


def openssl(key, block):
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def test_sbox_spot_values_from_fips197_figure7():
    assert (SBOX[0x00], SBOX[0x53], SBOX[0xFF], SBOX[0x10]) == (0x63, 0xED, 0x16, 0xCA)
    assert sorted(SBOX) == list(range(256)), "S-box is not a permutation"


def test_key_expansion_fips197_a3():
    rk = expand_key(FIPS_KEY_A3)
    assert len(rk) == 15
    # w[8], w[9] and w[59] as printed in FIPS-197 appendix A.3
    assert rk[2][:8].hex() == "9ba354118e6925af"
    assert rk[14][12:].hex() == "706c631e"


def test_fips197_c3():
    ct = encrypt_block(bytes(range(32)), bytes.fromhex("00112233445566778899aabbccddeeff"))
    assert ct.hex() == "8ea2b7ca516745bfeafc49904b496089"


@pytest.mark.parametrize("name", ["ECBGFSbox256.rsp", "ECBKeySbox256.rsp", "ECBVarKey256.rsp",
                                  "ECBVarTxt256.rsp"])
def test_cavp_ecb_kat(name):
    records = list(parse_rsp(open_rsp("ciphers", "AES", "ECB", name)))
    assert len(records) >= 10, f"{name}: only {len(records)} records read"
    for r in records:
        key, pt, ct = (bytes.fromhex(r[f]) for f in ("KEY", "PLAINTEXT", "CIPHERTEXT"))
        assert encrypt_block(key, pt) == ct, f"{name} COUNT {r['COUNT']}"


def test_random_against_openssl():
    rng = random.Random(2026)
    for _ in range(2000):
        key, block = rng.randbytes(32), rng.randbytes(16)
        assert encrypt_block(key, block) == openssl(key, block), f"key {key.hex()} block {block.hex()}"


def test_bus_lane_order():
    """encrypt_int takes byte k in bits 8k+7..8k, as the RTL ports do."""
    key, block = bytes(range(32)), bytes.fromhex("00112233445566778899aabbccddeeff")
    got = encrypt_int(int.from_bytes(key, "little"), int.from_bytes(block, "little"))
    assert got.to_bytes(16, "little") == openssl(key, block)


@pytest.mark.parametrize("key, block", [(bytes(16), bytes(16)), (bytes(32), bytes(15))])
def test_rejects_bad_sizes(key, block):
    with pytest.raises(ValueError):
        encrypt_block(key, block)
