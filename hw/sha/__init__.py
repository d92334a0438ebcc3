"""SHA-384 (FIPS 180-4) block engine (docs/sha.md): the iterative ``SHA384`` component.
Payload layouts are in :mod:`hw.sha.layout`."""
from .core import SHA384

__all__ = ["SHA384"]
