"""AES-256 forward cipher (docs/aes.md): the pipelined ``AES256`` component and
the bit-sliced ``sbox`` circuit it is built from. Payload layouts are in :mod:`hw.aes.layout`.
"""
from .core import AES256
from .sbox import sbox, sbox_model

__all__ = ["AES256", "sbox", "sbox_model"]
