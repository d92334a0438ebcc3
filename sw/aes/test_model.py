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


def _inv_mix_column(col):
    def mul(a, b):
        p = 0
        while b:
            if b & 1:
                p ^= a
            a, b = ((a << 1) ^ 0x1B) & 0xFF if a & 0x80 else a << 1, b >> 1
        return p
    a0, a1, a2, a3 = col
    return [mul(a0, 14) ^ mul(a1, 11) ^ mul(a2, 13) ^ mul(a3, 9),
            mul(a0, 9) ^ mul(a1, 14) ^ mul(a2, 11) ^ mul(a3, 13),
            mul(a0, 13) ^ mul(a1, 9) ^ mul(a2, 14) ^ mul(a3, 11),
            mul(a0, 11) ^ mul(a1, 13) ^ mul(a2, 9) ^ mul(a3, 14)]


def _decrypt_with(round_keys, block):
    """FIPS-197 §5.3 InvCipher with the given round keys (written here, not in the model)."""
    from sw.aes import INV_SBOX

    state = [b ^ k for b, k in zip(block, round_keys[14])]
    for rnd in range(13, -1, -1):
        # InvShiftRows: row r moves right by r columns; then InvSubBytes
        state = [state[4 * ((c - r) % 4) + r] for c in range(4) for r in range(4)]
        state = [INV_SBOX[b] for b in state]
        state = [b ^ k for b, k in zip(state, round_keys[rnd])]
        if rnd:
            state = sum((_inv_mix_column(state[4 * c:4 * c + 4]) for c in range(4)), [])
    return bytes(state)


def test_key_schedule_round_trip_against_openssl():
    """Every one of the 15 round keys of expand_key (the words the reset-scrub scans look
    for, tb/common/scrub.py) is right: the inverse cipher written above, run with them in
    reverse order, takes OpenSSL's ciphertext back to the plaintext, and a one-bit error in
    any expanded round key (2..14; 0 and 1 are the key itself) breaks that."""
    rng = random.Random(13)
    for _ in range(200):
        key, block = rng.randbytes(32), rng.randbytes(16)
        rk = expand_key(key)
        assert len(rk) == 15 and rk[0] + rk[1] == key
        assert _decrypt_with(rk, openssl(key, block)) == block, key.hex()
        wrong = list(rk)
        r = rng.randrange(2, 15)
        wrong[r] = bytes([wrong[r][0] ^ 1]) + wrong[r][1:]
        assert _decrypt_with(wrong, openssl(key, block)) != block
