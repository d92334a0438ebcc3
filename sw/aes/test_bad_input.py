"""Property tests: the AES model on random keys and blocks agrees with OpenSSL (via
cryptography), and on anything else raises only AesInputError (a ValueError; with
TypeError for a key or block of the wrong type).

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sw.aes.model import AesInputError, AesInputTypeError, encrypt_block, encrypt_int, expand_key

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
JUNK = st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=16),
                 st.lists(st.integers(0, 255), max_size=16))


def _openssl(key, block):
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


@SETTINGS
@given(st.one_of(st.binary(min_size=32, max_size=32), st.binary(max_size=40), JUNK),
       st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20), JUNK))
def test_encrypt_block_raises_only_aes_errors(key, block):
    try:
        got = encrypt_block(key, block)
    except AesInputError as e:
        assert not (isinstance(key, bytes) and len(key) == 32 and isinstance(block, bytes) and len(block) == 16)
        if not isinstance(key, bytes) or not isinstance(block, bytes):
            assert isinstance(e, AesInputTypeError)
        return
    assert got == _openssl(key, block)


def ints(bits):
    """An int of *bits* bits, a negative or wider one, or junk."""
    return st.one_of(st.integers(0, (1 << bits) - 1), st.integers(max_value=-1), st.integers(min_value=1 << bits), JUNK)


@SETTINGS
@given(ints(256), ints(128))
def test_encrypt_int_raises_only_aes_errors(key, block):
    try:
        got = encrypt_int(key, block)
    except AesInputError:
        assert not (type(key) is int and 0 <= key < 1 << 256 and type(block) is int and 0 <= block < 1 << 128)
        return
    assert got.to_bytes(16, "little") == _openssl(key.to_bytes(32, "little"), block.to_bytes(16, "little"))


def test_expand_key_types():
    with pytest.raises(AesInputTypeError):
        expand_key(None)
    with pytest.raises(AesInputError, match="32-byte key"):
        expand_key(bytes(31))
