"""The CCU's certificates under standard RFC 5280 path validators: OpenSSL
(``openssl verify -x509_strict``) and ``cryptography``'s verifier (``PolicyBuilder``, client
profile: device certificates name no DNS host, so the server profile does not apply). Both
accept CA → CIK → PIK → AK as a relying party receives it, and both reject chains with a
foreign issuer or a tampered signature. The RFC 5280 fields the validators need are also
checked against values computed here (key identifiers with hashlib)."""
import datetime
import hashlib
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from sw.ccu import ManufacturerCA
from sw.ccu.certs import issue_certificate, subject_name
from sw.ccu.testing import certificates, firmware, make_device, make_identities, make_manifest
from tb.common.toolchain import require_tool

PEM, DER = serialization.Encoding.PEM, serialization.Encoding.DER
# any instant inside the certificates' validity (2024-01-01 .. 9999-12-31)
WHEN = datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc)


def chain_of(device):
    """(CIK, PIK, AK) exactly as the evidence carries them (DER → Certificate)."""
    c = device.certificates
    return tuple(x509.load_der_x509_certificate(x.public_bytes(DER))
                 for x in (device.cik_certificate, c.pik_certificate, c.ak_certificate))


def openssl_verify(tmp_path, root, intermediates, leaf):
    """(accepted, output) of ``openssl verify -x509_strict``."""
    openssl = require_tool("openssl", "openssl verify of the chain")
    files = {}
    for name, certs in (("root", [root]), ("intermediates", intermediates), ("leaf", [leaf])):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_bytes(b"".join(c.public_bytes(PEM) for c in certs))
    cmd = [openssl, "verify", "-x509_strict", "-CAfile", str(files["root"])]
    if intermediates:
        cmd += ["-untrusted", str(files["intermediates"])]
    r = subprocess.run(cmd + [str(files["leaf"])], capture_output=True, text=True,
                       timeout=60)
    out = r.stdout + r.stderr
    return r.returncode == 0 and out.strip().endswith(": OK"), out


def policy_verify(root, intermediates, leaf):
    """The validated chain (leaf first) from cryptography's RFC 5280 client verifier."""
    verifier = PolicyBuilder().store(Store([root])).time(WHEN).build_client_verifier()
    return verifier.verify(leaf, list(intermediates))


@pytest.fixture(scope="module")
def world():
    ca = ManufacturerCA()
    bundle = firmware(ca)
    return ca, bundle, make_device(ca, bundle), make_device(ca, bundle, uds=bytes(48))


def test_openssl_strict_accepts_the_chain(world, tmp_path):
    ca, _, device, _ = world
    cik, pik, ak = chain_of(device)
    ok, out = openssl_verify(tmp_path, ca.certificate, [cik, pik], ak)
    assert ok, out


def test_cryptography_verifier_accepts_the_chain(world):
    ca, _, device, _ = world
    cik, pik, ak = chain_of(device)
    verified = policy_verify(ca.certificate, [cik, pik], ak)
    assert verified.chain == [ak, pik, cik, ca.certificate]
    (san,) = verified.subjects
    assert isinstance(san, x509.UniformResourceIdentifier) and san.value.startswith("urn:uuid:")


def test_ca_issued_pik_is_an_alternative_path(world, tmp_path):
    """CA → PIK (the CA-issued certificate from manufacturing) → AK also validates."""
    ca, _, device, _ = world
    ca_pik = device._store.ca_pik_certificate
    ak = chain_of(device)[2]
    assert policy_verify(ca.certificate, [ca_pik], ak).chain == [ak, ca_pik, ca.certificate]
    ok, out = openssl_verify(tmp_path, ca.certificate, [ca_pik], ak)
    assert ok, out


def test_reference_certificate_validates_under_the_root(world, tmp_path):
    ca, bundle, _, _ = world
    ref = ca.reference_certificate(bundle)
    assert policy_verify(ca.certificate, [], ref).chain == [ref, ca.certificate]
    ok, out = openssl_verify(tmp_path, ca.certificate, [], ref)
    assert ok, out


def _ext(cert, cls):
    return cert.extensions.get_extension_for_class(cls)


def test_rfc5280_profile(world):
    """What the validators look at, computed without the model: key identifiers are SHA-1
    of the subjectPublicKey bits (RFC 5280 § 4.2.1.2 method 1), AKI is the issuer's SKI,
    CA flags and key usage as the hierarchy needs them, serials positive and ≤ 20 octets."""
    ca, _, device, _ = world
    cik, pik, ak = chain_of(device)
    root = ca.certificate
    expect = {"root": (root, root, True, 2), "cik": (cik, root, True, 1),
              "pik": (pik, cik, True, 0), "ak": (ak, pik, False, None)}
    for name, (cert, issuer, is_ca, path_len) in expect.items():
        point = cert.public_key().public_bytes(serialization.Encoding.X962,
                                               serialization.PublicFormat.UncompressedPoint)
        ski = _ext(cert, x509.SubjectKeyIdentifier)
        assert ski.value.digest == hashlib.sha1(point).digest() and not ski.critical, name
        if cert is root:
            with pytest.raises(x509.ExtensionNotFound):
                _ext(cert, x509.AuthorityKeyIdentifier)      # self-signed: may be omitted
        else:
            aki = _ext(cert, x509.AuthorityKeyIdentifier)
            assert not aki.critical, name
            assert aki.value.key_identifier == \
                _ext(issuer, x509.SubjectKeyIdentifier).value.digest, name
        bc = _ext(cert, x509.BasicConstraints)
        assert bc.critical and (bc.value.ca, bc.value.path_length) == (is_ca, path_len), name
        ku = _ext(cert, x509.KeyUsage)
        assert ku.critical and ku.value.key_cert_sign == is_ca, name
        assert ku.value.digital_signature == (not is_ca), name
        assert 0 < cert.serial_number and \
            len(cert.serial_number.to_bytes(21, "big", signed=True).lstrip(b"\0")) <= 20, name
        # validity: UTCTime before 2050, GeneralizedTime from then on (RFC 5280 § 4.1.2.5)
        der = cert.tbs_certificate_bytes
        assert b"\x17\x0d240101000000Z" in der and b"\x18\x0f99991231235959Z" in der, name
    san = _ext(ak, x509.SubjectAlternativeName)
    assert not san.critical and len(san.value) == 1


# --- negative cases: both validators must refuse -------------------------------------


def _tampered(cert):
    """The same certificate with one bit of its signature flipped."""
    der = bytearray(cert.public_bytes(DER))
    der[-1] ^= 0x01
    return x509.load_der_x509_certificate(bytes(der))


def _bad_chains(world):
    ca, _, device, other = world
    cik, pik, ak = chain_of(device)
    o_cik, o_pik, o_ak = chain_of(other)             # another card, same firmware
    rogue = ManufacturerCA()                          # another manufacturer
    rogue_cik = rogue.issue_cik_certificate(device.certificates.cik_csr)
    # a certificate signed with the AK itself: the AK is not a CA
    stranger_key = rogue._fw_key
    under_ak = issue_certificate(device.cce._ak, ak.subject, subject_name("under the AK"),
                                 stranger_key.public_key(), ca=False)
    return {
        "AK of another card": ([cik, pik], o_ak),
        "PIK of another card": ([cik, o_pik], ak),
        "CIK issued by another CA": ([rogue_cik, pik], ak),
        "tampered PIK signature": ([cik, _tampered(pik)], ak),
        "tampered AK signature": ([cik, pik], _tampered(ak)),
        "no intermediates": ([], ak),
        "certificate issued by the AK": ([cik, pik, ak], under_ak),
    }


CASES = ["AK of another card", "PIK of another card", "CIK issued by another CA",
         "tampered PIK signature", "tampered AK signature", "no intermediates",
         "certificate issued by the AK"]


@pytest.mark.parametrize("case", CASES)
def test_cryptography_verifier_rejects(world, case):
    intermediates, leaf = _bad_chains(world)[case]
    with pytest.raises(VerificationError):
        policy_verify(world[0].certificate, intermediates, leaf)


@pytest.mark.parametrize("case", CASES)
def test_openssl_rejects(world, tmp_path, case):
    intermediates, leaf = _bad_chains(world)[case]
    ok, out = openssl_verify(tmp_path, world[0].certificate, intermediates, leaf)
    assert not ok and "error" in out, out


def test_rejects_under_another_root(world, tmp_path):
    """The genuine chain under a trust store holding another manufacturer's root."""
    _, _, device, _ = world
    cik, pik, ak = chain_of(device)
    stranger = ManufacturerCA().certificate
    with pytest.raises(VerificationError):
        policy_verify(stranger, [cik, pik], ak)
    ok, out = openssl_verify(tmp_path, stranger, [cik, pik], ak)
    assert not ok, out


def test_evidence_chain_validates(world, tmp_path):
    """The certificates exactly as create_tee returns them in the evidence (DER bytes)."""
    ca, bundle, _, _ = world
    ids = make_identities()
    device = make_device(ca, bundle)
    device.cce.create_tee(make_manifest(ids), certificates(ids))
    ev = device.cce.get_attestation_report()
    cik, pik, ak = (x509.load_der_x509_certificate(c) for c in ev.certificates)
    assert policy_verify(ca.certificate, [cik, pik], ak).chain[0] == ak
    ok, out = openssl_verify(tmp_path, ca.certificate, [cik, pik], ak)
    assert ok, out
