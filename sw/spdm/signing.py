"""Signatures over SPDM transcripts (DSP0274 "Signature generation").

SPDM 1.2: the signed message is ``combined_spdm_prefix || Hash(transcript)``, where
``combined_spdm_prefix`` = "dmtf-spdm-v1.2.*" four times (64 bytes) || zero pad ||
context string, the pad filling the context to 36 bytes. SPDM 1.1: the signed message is
the transcript itself (the signature is over its hash). Either way the algorithm is
ECDSA P-384 with SHA-384 and the signature travels as raw ``r || s`` (48 bytes each,
big-endian).
"""
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from .errors import SignatureError
from .messages import V12

__all__ = ["CHALLENGE_AUTH_CONTEXT", "MEASUREMENTS_CONTEXT", "KEY_EXCHANGE_RSP_CONTEXT", "signed_message",
           "sign", "verify"]

CHALLENGE_AUTH_CONTEXT = b"responder-challenge_auth signing"
MEASUREMENTS_CONTEXT = b"responder-measurements signing"
KEY_EXCHANGE_RSP_CONTEXT = b"responder-key_exchange_rsp signing"


def signed_message(version: int, context: bytes, transcript: bytes) -> bytes:
    """The bytes ECDSA-SHA-384 signs for *transcript* under *version*."""
    if version >= V12:
        prefix = (b"dmtf-spdm-v%d.%d.*" % (version >> 4, version & 0xF)) * 4
        return prefix + bytes(36 - len(context)) + context + hashlib.sha384(transcript).digest()
    return transcript


def sign(key: ec.EllipticCurvePrivateKey, version: int, context: bytes, transcript: bytes) -> bytes:
    der = key.sign(signed_message(version, context, transcript), ec.ECDSA(hashes.SHA384()))
    r, s = decode_dss_signature(der)
    return r.to_bytes(48, "big") + s.to_bytes(48, "big")


def verify(public_key, version: int, context: bytes, transcript: bytes, signature: bytes):
    """Raise :class:`~sw.spdm.errors.SignatureError` unless *signature* (raw r || s) is
    the key's signature of *transcript*."""
    if len(signature) != 96:
        raise SignatureError(f"signature is {len(signature)} bytes, not 96")
    der = encode_dss_signature(int.from_bytes(signature[:48], "big"), int.from_bytes(signature[48:], "big"))
    try:
        public_key.verify(der, signed_message(version, context, transcript), ec.ECDSA(hashes.SHA384()))
    except InvalidSignature:
        raise SignatureError(f"{context.decode()}: signature does not verify over the transcript") from None
