"""Property tests: the CCU's parsers of outside bytes — DER and the measurement extension,
key packages (header, plaintext, and the CCE's submit_key_package), attestation reports —
and the relying party's verify take random and mutated (bit-flipped, truncated, extended)
encodings and raise only the errors :mod:`sw.ccu.errors` (and :mod:`sw.ccu.der`) document,
never IndexError, AttributeError, KeyError, struct.error or a library's bare ValueError.
Where a mutated encoding still parses, it is the canonical encoding of what it parses to
(the decoders are strict: one value, one encoding).

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import dataclasses
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sw.ccu import der
from sw.ccu.certs import decode_measurements, encode_measurements, measurements_of
from sw.ccu.errors import (
    CcuError,
    ChainError,
    KeyPackageError,
    MalformedPackageError,
    MalformedReportError,
    VerificationError,
)
from sw.ccu.keypkg import (
    HEADER_SIZE,
    KeyPackageContents,
    decode_plaintext,
    encode_plaintext,
    open_package,
    parse_header,
)
from sw.ccu.report import AttestationReport, split_signed_report
from sw.ccu.testing import (
    MODEL,
    ManufacturerCA,
    certificates,
    firmware,
    make_device,
    make_identities,
    make_manifest,
    make_parties,
    make_party_keys,
)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
NOT_BYTES = st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.integers(0, 255), max_size=4))


@st.composite
def mutated(draw, encoding):
    """*encoding* with one flaw: a flipped bit, a cut, bytes appended, a byte replaced, or
    replaced by random bytes altogether."""
    how = draw(st.sampled_from(["flip", "truncate", "extend", "replace byte", "random"]), label="mutation")
    b = bytearray(encoding)
    if how == "flip" and b:
        bit = draw(st.integers(0, 8 * len(b) - 1), label="bit")
        b[bit // 8] ^= 1 << bit % 8
    elif how == "truncate":
        del b[draw(st.integers(0, max(0, len(b) - 1)), label="cut"):]
    elif how == "extend":
        b += draw(st.binary(min_size=1, max_size=8), label="tail")
    elif how == "replace byte" and b:
        b[draw(st.integers(0, len(b) - 1), label="at")] = draw(st.integers(0, 255), label="byte")
    else:
        b = bytearray(draw(st.binary(max_size=2 * len(encoding) + 4), label="random"))
    return bytes(b)


# ---- DER and the measurement extension -------------------------------------------------------
MEASUREMENTS = {"secondary-bootloader": bytes(range(48)), "icu-firmware": bytes(48), "cce": b"\xff" * 48}
ENCODED = encode_measurements(MEASUREMENTS)


def test_audit_cases_der():
    for bad in (b"", b"\x30", b"\x30\x81\x05abcde", b"\x30\x85\x00\x00\x00\x00\x01", ENCODED + b"\x30\x00"):
        with pytest.raises(der.DerError):
            decode_measurements(bad)
    with pytest.raises(der.DerTypeError):
        der.read_tlv(None)
    # lengths: non-minimal short, leading zero, over 4 bytes, indefinite
    for bad in (b"\x04\x81\x01x", b"\x04\x82\x00\x80" + bytes(128), b"\x04\x85" + bytes(5), b"\x04\x80"):
        with pytest.raises(der.DerError, match="DER length"):
            der.read_tlv(bad)
    assert der.read_tlv(b"\x04\x81\x80" + bytes(128)) == (4, bytes(128), 131)
    with pytest.raises(der.DerError):                   # a name that is not UTF-8
        decode_measurements(der.tlv(der.SEQUENCE, der.tlv(der.SEQUENCE, der.tlv(der.UTF8STRING, b"\xff")
                                                           + ENCODED[-(2 + 11 + 2 + 48):-(2 + 48)]
                                                           + der.tlv(der.OCTET_STRING, bytes(48)))))


@SETTINGS
@given(st.one_of(mutated(ENCODED), NOT_BYTES))
def test_measurement_decoder_raises_only_der_errors(blob):
    try:
        items = decode_measurements(blob)
    except der.DerError:
        return
    assert encode_measurements(items) == blob, "a non-canonical encoding was accepted"


@SETTINGS
@given(st.binary(max_size=40), st.integers(-2, 42))
def test_read_tlv_raises_only_der_errors(blob, pos):
    try:
        tag, content, end = der.read_tlv(blob, pos)
    except der.DerError:
        return
    assert blob[pos] == tag and pos + 2 + len(content) <= end <= len(blob) and blob[end - len(content):end] == content


# ---- key packages --------------------------------------------------------------------------
CONTENTS = KeyPackageContents(b"job-0001-abcdefg", MODEL, 7, bytes(range(32)), ((10, bytes(32)), (11, b"\x01" * 32)),
                              b"\x02" * 32)
PLAINTEXT = encode_plaintext(CONTENTS)


@SETTINGS
@given(st.one_of(mutated(PLAINTEXT), NOT_BYTES))
def test_package_plaintext_raises_only_package_errors(blob):
    try:
        contents = decode_plaintext(blob)
    except MalformedPackageError:
        return
    assert encode_plaintext(contents) == blob, "a non-canonical plaintext was accepted"


@SETTINGS
@given(st.one_of(st.binary(max_size=HEADER_SIZE + 40), NOT_BYTES))
def test_package_header_raises_only_package_errors(blob):
    try:
        header, rest = parse_header(blob)
    except MalformedPackageError:
        return
    assert header.encode() == blob[:HEADER_SIZE] and rest == blob[HEADER_SIZE:]
    with pytest.raises(KeyPackageError):                # random bytes never authenticate
        open_package(header, rest, os.urandom(48))


# ---- evidence and the relying party ---------------------------------------------------------
@pytest.fixture(scope="module")
def rig():
    """A device with a TEE created, its evidence, and a relying party that accepts it."""
    ca = ManufacturerCA()
    bundle = firmware(ca)
    identities = make_identities()
    manifest = make_manifest(identities)
    device = make_device(ca, bundle)
    device.cce.create_tee(manifest, certificates(identities))
    party = make_parties(ca, ca.reference_certificate(bundle), identities, manifest)[MODEL]
    evidence = device.cce.get_attestation_report()
    party.verify(evidence)
    return device, party, evidence


def test_audit_cases_verify(rig):
    """A garbage certificate gave a raw ValueError, a non-bytes one an AttributeError."""
    _, party, evidence = rig
    certs = list(evidence.certificates)
    for bad, match in ((b"garbage", "PIK certificate: the bytes are not a DER X.509 certificate"),
                       (12345, "PIK certificate is a int"), (None, "PIK certificate is a NoneType"),
                       ("text", "PIK certificate is a str")):
        with pytest.raises(ChainError, match=match):
            party.verify(dataclasses.replace(evidence, certificates=(certs[0], bad, certs[2])))
    for bad in (None, 5, b"\x30\x03", "abc"):
        with pytest.raises(ChainError):
            party.verify(dataclasses.replace(evidence, certificates=bad))
    for bad in (None, 12, "report"):
        with pytest.raises(MalformedReportError, match="not bytes"):
            party.verify(dataclasses.replace(evidence, report=bad))
    with pytest.raises(ChainError):                     # not evidence at all: no certificates
        party.verify(object())


@SETTINGS
@given(st.data())
def test_verify_raises_only_verification_errors(rig, draw):
    """One certificate (or the report) mutated or replaced by junk: a VerificationError,
    or — when the mutation left the DER meaning the same certificate — acceptance."""
    _, party, evidence = rig
    certs = list(evidence.certificates)
    which = draw.draw(st.integers(0, 3), label="which")        # 3: the report
    if which == 3:
        bad = draw.draw(st.one_of(mutated(evidence.report), NOT_BYTES), label="report")
        ev = dataclasses.replace(evidence, report=bad)
    else:
        certs[which] = draw.draw(st.one_of(mutated(certs[which]), NOT_BYTES), label="certificate")
        ev = dataclasses.replace(evidence, certificates=tuple(certs))
    try:
        party.verify(ev)
    except VerificationError:
        return
    # accepted: the certificate parsed to the same one (DER can carry slack the parser drops)
    if which == 3:
        assert ev.report == evidence.report
    else:
        assert x509.load_der_x509_certificate(certs[which]) == x509.load_der_x509_certificate(
            evidence.certificates[which])


@SETTINGS
@given(st.data())
def test_report_decoder_raises_only_malformed_report(rig, draw):
    """sw.ccu.report's decoder (after the signature split) on mutated bodies."""
    _, _, evidence = rig
    body, _ = split_signed_report(evidence.report)
    blob = draw.draw(mutated(body), label="body")
    try:
        report = AttestationReport.decode(blob)
    except MalformedReportError:
        return
    assert report.encode() == blob


@SETTINGS
@given(st.data())
def test_measurement_extension_of_mutated_certificates(rig, draw):
    """measurements_of on a certificate whose DER was mutated but still loads: ChainError
    or the measurements."""
    device, _, _ = rig
    der_bytes = device.certificates.ak_certificate.public_bytes(serialization.Encoding.DER)
    blob = draw.draw(mutated(der_bytes), label="der")
    try:
        cert = x509.load_der_x509_certificate(blob)
    except ValueError:
        return
    try:
        found = measurements_of(cert, "AK certificate")
    except ChainError:
        return
    assert isinstance(found, dict)


@SETTINGS
@given(st.one_of(st.binary(max_size=300), NOT_BYTES))
def test_submit_key_package_raises_only_package_errors(rig, blob):
    """The CCE's public key-package input (sw.ccu.cce) on junk: a KeyPackageError (a
    CcuError), nothing accepted."""
    device, party, evidence = rig
    with pytest.raises(CcuError) as info:
        device.cce.submit_key_package(blob)
    assert isinstance(info.value, KeyPackageError), repr(info.value)


def test_submit_mutated_packages(rig):
    """Mutations of a real package: rejected with a KeyPackageError."""
    device, party, evidence = rig
    verified = party.verify(evidence)
    package = party.wrap_keys(verified, make_party_keys()[MODEL])

    @SETTINGS
    @given(mutated(package))
    def check(blob):
        if blob == package:
            return
        with pytest.raises(KeyPackageError):
            device.cce.submit_key_package(blob)
    check()
