"""Shared fixtures of the SPDM tests: one manufacturer hierarchy and one device (key
derivation and certificate signing are the slow part), fixed RTS values, a recording transport."""
import hashlib

import pytest

from sw.spdm.identity import Manufacturer


class Recorder:
    """Transport that records every (request, response) and can rewrite one message."""

    def __init__(self, responder, *, on_request=None, on_response=None):
        self.responder = responder
        self.log = []
        self.on_request = on_request or (lambda raw: raw)
        self.on_response = on_response or (lambda req, raw: raw)

    def __call__(self, raw):
        raw = self.on_request(raw)
        rsp = self.on_response(raw, self.responder.handle(raw))
        self.log.append((raw, rsp))
        return rsp


def rts_values(tag=b"rts"):
    """64 distinct 48-byte slot values, as the RTS would hold after measured boot."""
    return [hashlib.sha384(tag + bytes([i])).digest() for i in range(64)]


@pytest.fixture(scope="session")
def manufacturer():
    return Manufacturer()


@pytest.fixture(scope="session")
def device(manufacturer):
    return manufacturer.issue_device(0x4100_5A5A)
