"""The OCSP responder model and the client check: good / revoked / unknown, signed
responses, nonce, thisUpdate/nextUpdate, and each way a response can fail to verify."""
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509 import ocsp

from sw.attest.errors import AttestInputError, OcspError
from sw.attest.ocsp import OcspClient, OcspResponder, build_request, check_response
from sw.attest.testbed import AT, Env
from sw.spdm.identity import Manufacturer

NONCE = bytes(range(32))


@pytest.fixture(scope="module")
def own():
    return Env()


def leaf_and_issuer(env):
    return env.device.certificates[-1], env.device.certificates[-2]


def ask(env, cert, issuer, nonce=NONCE, at=AT, responder=None):
    response = (responder or env.ocsp).respond(build_request(cert, issuer, nonce))
    return check_response(response, cert, issuer, at=at, nonce=nonce)


def test_good_for_every_link_of_both_chains(own):
    device = list(own.device.certificates)[::-1]
    for cert, issuer in zip(device, device[1:]):
        assert ask(own, cert, issuer).status == "good"
    rim = list(own.signer.certificates)
    for cert, issuer in zip(rim, rim[1:]):
        assert ask(own, cert, issuer).status == "good"


def test_revoked_and_unknown():
    env = Env()
    leaf, issuer = leaf_and_issuer(env)
    env.ocsp.revoke(leaf, issuer, reason=x509.ReasonFlags.superseded)
    result = ask(env, leaf, issuer)
    assert (result.status, result.reason) == ("revoked", "superseded")
    stranger = env.manufacturer.issue_device(0x1234)  # same CA chain shape, leaf never registered
    # the stranger's leaf is issued by its own device key: an issuer the responder does not serve
    with pytest.raises(OcspError, match="UNAUTHORIZED"):
        ask(env, stranger.certificates[-1], stranger.certificates[-2])
    # a device certificate the provisioner CA issued but the responder was never told about
    assert ask(env, stranger.certificates[-2], stranger.certificates[-3]).status == "unknown"


def test_nonce_must_come_back(own):
    leaf, issuer = leaf_and_issuer(own)
    response = own.ocsp.respond(build_request(leaf, issuer, NONCE))
    with pytest.raises(OcspError, match="nonce is not the one sent"):
        check_response(response, leaf, issuer, at=AT, nonce=bytes(32))
    no_nonce = own.ocsp.respond(build_request(leaf, issuer, None))
    with pytest.raises(OcspError, match="carries no nonce"):
        check_response(no_nonce, leaf, issuer, at=AT, nonce=NONCE)
    assert check_response(no_nonce, leaf, issuer, at=AT, nonce=None).status == "good"


def test_freshness_window(own):
    leaf, issuer = leaf_and_issuer(own)
    with pytest.raises(OcspError, match="not current"):
        ask(own, leaf, issuer, at=AT + datetime.timedelta(hours=2))  # past nextUpdate (1 h)
    with pytest.raises(OcspError, match="not current"):
        ask(own, leaf, issuer, at=AT - datetime.timedelta(minutes=1))  # before thisUpdate
    long_lived = OcspResponder(clock=lambda: AT, validity=datetime.timedelta(days=30))
    m = own.manufacturer
    long_lived.add_chain(list(own.device.certificates)[::-1],
                         [own.device.device_key, m.provisioner_key, m.product_key, m.root_key])
    with pytest.raises(OcspError, match="older than"):
        ask(own, leaf, issuer, at=AT + datetime.timedelta(days=2), responder=long_lived)


def test_response_about_another_certificate(own):
    leaf, issuer = leaf_and_issuer(own)
    device, provisioner = own.device.certificates[-2], own.device.certificates[-3]
    response = own.ocsp.respond(build_request(device, provisioner, NONCE))
    with pytest.raises(OcspError, match="another certificate"):
        check_response(response, leaf, issuer, at=AT, nonce=NONCE)


def test_signer_not_certified_by_the_issuer(own):
    """A responder whose delegated signer another CA certified (same subject names)."""
    leaf, issuer = leaf_and_issuer(own)
    impostor = OcspResponder(clock=lambda: AT, seed=b"impostor")
    other = Manufacturer(b"attest-manufacturer-impostor").issue_device(0x0BAD)  # device keys derive from the serial
    # register the real issuer certificate, but with the other device's key signing the responder
    impostor.add_issuer(issuer, other.device_key)
    impostor.add_certificate(leaf, issuer)
    with pytest.raises(OcspError, match="not certified by its issuer"):
        ask(own, leaf, issuer, responder=impostor)


def test_response_signature_checked(own):
    leaf, issuer = leaf_and_issuer(own)
    response = bytearray(own.ocsp.respond(build_request(leaf, issuer, NONCE)))
    parsed = ocsp.load_der_ocsp_response(bytes(response))
    at = bytes(response).index(parsed.signature)
    response[at + len(parsed.signature) // 2] ^= 1
    with pytest.raises(OcspError):
        check_response(bytes(response), leaf, issuer, at=AT, nonce=NONCE)


def test_responder_signer_without_ocsp_eku(own):
    """A response signed by a certificate the issuer did sign, but not for OCSP."""
    leaf, issuer = leaf_and_issuer(own)
    device, provisioner = own.device.certificates[-2], own.device.certificates[-3]
    # the device certificate itself (a CA, issued by the provisioner) signs a response about itself
    builder = ocsp.OCSPResponseBuilder().add_response(
        cert=device, issuer=provisioner, algorithm=hashes.SHA384(), cert_status=ocsp.OCSPCertStatus.GOOD,
        this_update=AT, next_update=AT + datetime.timedelta(hours=1), revocation_time=None, revocation_reason=None)
    builder = builder.responder_id(ocsp.OCSPResponderEncoding.HASH, device).certificates([device])
    forged = builder.sign(own.device.device_key, hashes.SHA384()).public_bytes(serialization.Encoding.DER)
    with pytest.raises(OcspError, match="lacks id-kp-OCSPSigning"):
        check_response(forged, device, provisioner, at=AT, nonce=None)


def test_malformed_inputs(own):
    leaf, issuer = leaf_and_issuer(own)
    with pytest.raises(OcspError):
        check_response(b"\x30\x03\x0a\x01\x00garbage", leaf, issuer, at=AT)
    with pytest.raises(AttestInputError):
        check_response("not bytes", leaf, issuer, at=AT)
    bad = ocsp.load_der_ocsp_response(own.ocsp.respond(b"garbage"))
    assert bad.response_status == ocsp.OCSPResponseStatus.MALFORMED_REQUEST
    with pytest.raises(TypeError):
        OcspClient("not callable")
    with pytest.raises(ValueError):
        OcspResponder(validity=datetime.timedelta(0))
