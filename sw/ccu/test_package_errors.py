"""The CCU rejects bad key packages with the specific error and changes nothing: after
every rejection the state, the SXP port log and the accepted packages are as before, and
the parties' good packages (counter 1) are still accepted afterwards."""
import os
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sw.ccu import (
    MalformedPackageError,
    PackageAuthError,
    ReplayedPackageError,
    ResumeError,
    ResumePoint,
    StaleReportError,
    TruncatedPackageError,
    UnexpectedKeyError,
    WrongJobError,
    WrongPartyError,
)
from sw.ccu.keypkg import HEADER_SIZE, KeyPackageContents, encode_plaintext, seal_package
from sw.ccu.testing import (
    CODE_KEY,
    DATA,
    DATA_KEY_A,
    MODEL,
    certificates,
    make_device,
    make_identities,
    make_manifest,
    make_parties,
)


@pytest.fixture
def verified(created, parties):
    ev = created.cce.get_attestation_report()
    return {pid: p.verify(ev) for pid, p in parties.items()}


def rejected(device, package, exc, match):
    cce = device.cce
    before = (cce.state, list(device.port.log), dict(cce._packages))
    with pytest.raises(exc, match=match):
        cce.submit_key_package(package)
    assert (cce.state, device.port.log, cce._packages) == before


def good_packages_still_accepted(device, parties, verified, party_keys):
    for pid, p in parties.items():
        p.counter = 0
        device.cce.submit_key_package(p.wrap_keys(verified[pid], party_keys[pid]))
    device.cce.launch()
    assert device.port.keys[0] == party_keys[MODEL][CODE_KEY]


def handmade(identity_key, v, manifest, party_id=MODEL, counter=1, keys=(), plaintext=None,
             resume_nonce=None, job_id=None):
    """A package sealed with ``identity_key``'s ECDH secret (model code for the format,
    the test chooses every field)."""
    c = KeyPackageContents(job_id or manifest.job_id, party_id, counter, os.urandom(32),
                           tuple(keys), resume_nonce)
    z = identity_key.exchange(ec.ECDH(), v.ccu_public_key)
    return seal_package(c, z, v.report_hash, plaintext=plaintext)


def test_package_from_another_job(created, parties, verified, party_keys, ca, bundle,
                                  identities, reference):
    other_manifest = make_manifest(identities, job_id=b"job-0002-zyxwvut")
    other = make_device(ca, bundle, uds=os.urandom(48))
    other.cce.create_tee(other_manifest, certificates(identities))
    p = make_parties(ca, reference, identities, other_manifest)[MODEL]
    pkg = p.wrap_keys(p.verify(other.cce.get_attestation_report()), party_keys[MODEL])
    rejected(created, pkg, WrongJobError,
             "package is for job 6a6f622d303030322d7a797877767574, this TEE runs job "
             "6a6f622d303030312d61626364656667")
    good_packages_still_accepted(created, parties, verified, party_keys)


def test_package_from_a_party_not_in_the_job(created, parties, verified, party_keys,
                                             manifest):
    stranger = make_identities(3)[3][0]
    rejected(created, handmade(stranger, verified[MODEL], manifest, party_id=3),
             WrongPartyError, r"party 3, which is not in job .* \(parties \[1, 2\]\)")
    good_packages_still_accepted(created, parties, verified, party_keys)


def test_package_relabelled_as_another_party(created, parties, verified, party_keys,
                                             manifest, identities):
    data_key = identities[DATA][0]
    rejected(created, handmade(data_key, verified[MODEL], manifest, party_id=MODEL),
             PackageAuthError, "party 1 fails authentication")
    good_packages_still_accepted(created, parties, verified, party_keys)


def test_package_for_a_previous_tee(created, parties, verified, party_keys, manifest,
                                    identities):
    old = parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL])
    created.reset()
    created.cce.create_tee(manifest, certificates(identities))
    rejected(created, old, StaleReportError, "bound to report .*, this TEE's report is")
    ev = created.cce.get_attestation_report()
    good_packages_still_accepted(created, parties,
                                 {pid: p.verify(ev) for pid, p in parties.items()}, party_keys)


def test_replayed_package(created, parties, verified, party_keys):
    p = parties[MODEL]
    first = p.wrap_keys(verified[MODEL], party_keys[MODEL])
    second = p.wrap_keys(verified[MODEL], party_keys[MODEL])
    created.cce.submit_key_package(first)
    rejected(created, first, ReplayedPackageError, "counter 1 is not above 1: replayed")
    created.cce.submit_key_package(second)
    rejected(created, first, ReplayedPackageError, "counter 1 is not above 2")
    rejected(created, second, ReplayedPackageError, "counter 2 is not above 2")


@pytest.mark.parametrize("cut", [0, 10, HEADER_SIZE, HEADER_SIZE + 15])
def test_truncated_package(created, parties, verified, party_keys, cut):
    pkg = parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL])
    rejected(created, pkg[:cut], TruncatedPackageError, f"package of {cut} bytes")
    good_packages_still_accepted(created, parties, verified, party_keys)


def test_truncated_ciphertext_fails_authentication(created, parties, verified, party_keys):
    pkg = parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL])
    for bad in (pkg[:-1], pkg[:HEADER_SIZE + 16], pkg + b"\x00"):
        rejected(created, bad, PackageAuthError, "fails authentication")


@pytest.mark.parametrize("offset", [0, 4, 5])
def test_bad_magic_version_reserved(created, parties, verified, party_keys, offset):
    pkg = bytearray(parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL]))
    pkg[offset] ^= 0x02
    rejected(created, bytes(pkg), MalformedPackageError, "not a version-1 key package")


@pytest.mark.parametrize("offset", [HEADER_SIZE - 13, HEADER_SIZE - 1, HEADER_SIZE, -1])
def test_altered_package(created, parties, verified, party_keys, offset):
    """Counter, IV, ciphertext, tag: any flipped bit fails AES-GCM."""
    pkg = bytearray(parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL]))
    pkg[offset] ^= 0x80
    rejected(created, bytes(pkg), PackageAuthError, "fails authentication")
    good_packages_still_accepted(created, parties, verified, party_keys)


_FLAGS = 16 + 2 + 8 + 32     # offset of the flags byte: job id, party id, counter, nonce


def _plain(manifest, party_id=MODEL, counter=1, keys=((CODE_KEY, bytes(32)),)):
    return encode_plaintext(KeyPackageContents(manifest.job_id, party_id, counter,
                                               bytes(32), keys))


@pytest.mark.parametrize("make_pt, exc, match", [
    (lambda m: _plain(m) + b"\x00", MalformedPackageError, "1 trailing bytes"),
    (lambda m: _plain(m)[:-5], TruncatedPackageError, "truncated in key"),
    (lambda m: _plain(m)[:20], TruncatedPackageError, "truncated in party id"),
    (lambda m: _plain(m, party_id=DATA), MalformedPackageError, "disagrees with its header"),
    (lambda m: _plain(m, counter=9), MalformedPackageError, "disagrees with its header"),
    (lambda m: _plain(m)[:_FLAGS] + b"\x02" + _plain(m)[_FLAGS + 1:], MalformedPackageError,
     "unknown key package flags"),
    (lambda m: _plain(m)[:_FLAGS + 1] + struct.pack(">HH32sH32s", 2, 11, bytes(32), 10,
                                                    bytes(32)),
     MalformedPackageError, "not unique and ascending"),
])
def test_malformed_but_authentic_plaintext(created, verified, identities, manifest, make_pt,
                                           exc, match):
    pkg = handmade(identities[MODEL][0], verified[MODEL], manifest, plaintext=make_pt(manifest))
    rejected(created, pkg, exc, match)


def test_key_the_manifest_gives_another_party(created, parties, verified, party_keys):
    keys = {**party_keys[MODEL], DATA_KEY_A: os.urandom(32)}
    pkg = parties[MODEL].wrap_keys(verified[MODEL], keys)
    rejected(created, pkg, UnexpectedKeyError, r"party 1 supplied key id\(s\) \[20\]")
    good_packages_still_accepted(created, parties, verified, party_keys)


def test_resume_nonce_must_match_the_run(created, parties, verified, party_keys, device,
                                         manifest, identities):
    pkg = parties[MODEL].wrap_keys(verified[MODEL], party_keys[MODEL],
                                   resume_nonce=os.urandom(32))
    rejected(created, pkg, ResumeError, "this run is fresh but the package has a resume")
    created.reset()
    created.cce.create_tee(manifest, certificates(identities), ResumePoint(2, 5))
    v = parties[MODEL].verify(created.cce.get_attestation_report(), epoch=3, checkpoint_id=5)
    rejected(created, parties[MODEL].wrap_keys(v, party_keys[MODEL]), ResumeError,
             "resumes from a checkpoint but the package has no resume nonce")
