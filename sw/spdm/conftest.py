"""Shared fixtures of the SPDM tests: one manufacturer hierarchy and one device (key
derivation and certificate signing are the slow part), fixed RTS values."""
import hashlib

import pytest

from sw.spdm.identity import Manufacturer


def rts_values(tag=b"rts"):
    """64 distinct 48-byte slot values, as the RTS would hold after measured boot."""
    return [hashlib.sha384(tag + bytes([i])).digest() for i in range(64)]


@pytest.fixture(scope="session")
def manufacturer():
    return Manufacturer()


@pytest.fixture(scope="session")
def device(manufacturer):
    return manufacturer.issue_device(0x4100_5A5A)
