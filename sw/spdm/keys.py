"""The SPDM key schedule (DSP0274 "Key schedule"; DSP0277 uses its outputs to protect
secured messages) for SHA-384 and AES-256-GCM.

    HandshakeSecret = HKDF-Extract(salt = 0^H, IKM = DHE shared secret)
    {req,rsp} handshake secret = HKDF-Expand(HandshakeSecret, BinConcat(H, "{req,rsp} hs data", TH1), H)
    finished key     = HKDF-Expand(handshake secret, BinConcat(H, "finished"), H)
    Salt1            = HKDF-Expand(HandshakeSecret, BinConcat(H, "derived"), H)
    MasterSecret     = HKDF-Extract(salt = Salt1, IKM = 0^H)
    {req,rsp} data secret = HKDF-Expand(MasterSecret, BinConcat(H, "{req,rsp} app data", TH2), H)
    export master secret  = HKDF-Expand(MasterSecret, BinConcat(H, "exp master", TH2), H)
    key = HKDF-Expand(secret, BinConcat(32, "key"), 32); iv = HKDF-Expand(secret, BinConcat(12, "iv"), 12)

BinConcat(Length, Version, Label, Context) = Length (2 bytes, little-endian) ||
"spdm1.x " (8 bytes, the negotiated version) || Label || Context. TH1 and TH2 are the
SHA-384 transcript hashes (see :mod:`sw.spdm.responder`).
"""
import dataclasses
import hashlib
import hmac

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from .messages import HASH_SIZE

__all__ = ["bin_concat", "hkdf_extract", "hkdf_expand", "HandshakeKeys", "SessionKeys", "DirectionKeys",
           "handshake_keys", "data_keys", "hmac384", "AEAD_KEY_SIZE", "AEAD_IV_SIZE"]

AEAD_KEY_SIZE = 32
AEAD_IV_SIZE = 12


def bin_concat(length: int, version: int, label: bytes, context: bytes = b"") -> bytes:
    return length.to_bytes(2, "little") + b"spdm%d.%d " % (version >> 4, version & 0xF) + label + context


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt, ikm, hashlib.sha384).digest()


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    return HKDFExpand(hashes.SHA384(), length, info).derive(prk)


def hmac384(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha384).digest()


@dataclasses.dataclass(frozen=True)
class DirectionKeys:
    """One direction's AEAD key (32 bytes) and IV (12 bytes)."""
    key: bytes
    iv: bytes


@dataclasses.dataclass(frozen=True)
class HandshakeKeys:
    handshake_secret: bytes
    request_handshake_secret: bytes
    response_handshake_secret: bytes
    request_finished_key: bytes
    response_finished_key: bytes
    request: DirectionKeys
    response: DirectionKeys


@dataclasses.dataclass(frozen=True)
class SessionKeys:
    """The session's data-phase keys. ``request`` protects requester → responder traffic
    (host → device), ``response`` responder → requester (device → host)."""
    master_secret: bytes
    request_data_secret: bytes
    response_data_secret: bytes
    export_master_secret: bytes
    request: DirectionKeys
    response: DirectionKeys


def _direction(version, secret):
    return DirectionKeys(hkdf_expand(secret, bin_concat(AEAD_KEY_SIZE, version, b"key"), AEAD_KEY_SIZE),
                         hkdf_expand(secret, bin_concat(AEAD_IV_SIZE, version, b"iv"), AEAD_IV_SIZE))


def handshake_keys(version: int, dhe_secret: bytes, th1: bytes) -> HandshakeKeys:
    hs = hkdf_extract(bytes(HASH_SIZE), dhe_secret)
    req = hkdf_expand(hs, bin_concat(HASH_SIZE, version, b"req hs data", th1), HASH_SIZE)
    rsp = hkdf_expand(hs, bin_concat(HASH_SIZE, version, b"rsp hs data", th1), HASH_SIZE)
    fin = bin_concat(HASH_SIZE, version, b"finished")
    return HandshakeKeys(hs, req, rsp, hkdf_expand(req, fin, HASH_SIZE), hkdf_expand(rsp, fin, HASH_SIZE),
                         _direction(version, req), _direction(version, rsp))


def data_keys(version: int, handshake: HandshakeKeys, th2: bytes) -> SessionKeys:
    salt1 = hkdf_expand(handshake.handshake_secret, bin_concat(HASH_SIZE, version, b"derived"), HASH_SIZE)
    master = hkdf_extract(salt1, bytes(HASH_SIZE))
    req = hkdf_expand(master, bin_concat(HASH_SIZE, version, b"req app data", th2), HASH_SIZE)
    rsp = hkdf_expand(master, bin_concat(HASH_SIZE, version, b"rsp app data", th2), HASH_SIZE)
    export = hkdf_expand(master, bin_concat(HASH_SIZE, version, b"exp master", th2), HASH_SIZE)
    return SessionKeys(master, req, rsp, export, _direction(version, req), _direction(version, rsp))
