"""AES-256 golden model (FIPS-197), bit-exact with ``hw.aes``."""
from .model import INV_SBOX, SBOX, encrypt_block, encrypt_int, expand_key

__all__ = ["SBOX", "INV_SBOX", "expand_key", "encrypt_block", "encrypt_int"]
