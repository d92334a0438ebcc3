"""Fixtures of the attestation tests (the set-up itself is sw.attest.testbed, shared with
the bench)."""
import pytest

from sw.attest.testbed import Env


@pytest.fixture(scope="session")
def env():
    return Env()
