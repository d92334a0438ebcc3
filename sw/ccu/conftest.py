"""Fixtures of the CCU tests (helpers live in sw/ccu/testing.py)."""
import pytest

from sw.ccu.testing import (
    ManufacturerCA,
    certificates,
    firmware,
    make_device,
    make_identities,
    make_manifest,
    make_parties,
    make_party_keys,
)


@pytest.fixture(scope="session")
def ca():
    return ManufacturerCA()


@pytest.fixture(scope="session")
def bundle(ca):
    return firmware(ca)


@pytest.fixture(scope="session")
def reference(ca, bundle):
    return ca.reference_certificate(bundle)


@pytest.fixture
def device(ca, bundle):
    return make_device(ca, bundle)


@pytest.fixture(scope="session")
def identities():
    return make_identities()


@pytest.fixture(scope="session")
def manifest(identities):
    return make_manifest(identities)


@pytest.fixture
def parties(ca, reference, identities, manifest):
    return make_parties(ca, reference, identities, manifest)


@pytest.fixture
def party_keys():
    return make_party_keys()


@pytest.fixture
def created(device, manifest, identities):
    """A device whose CCE has created the TEE for ``manifest``."""
    device.cce.create_tee(manifest, certificates(identities))
    return device
