"""Attestation report: canonical encoding, AK signature, parsing.

The signed bytes (*body*) are, integers big-endian::

    "ITXR"  u16 version=1  u16 reserved=0
    job_id[16]  manifest_hash[48]  u32 epoch  u32 checkpoint_id
    u16 n_slots=64   { slot[48] }*64                 measurement storage, slot order
    u16 n_parties    { u16 party_id  fingerprint[48] }*   ascending party id
    u16 len=97       ecdh_public[97]                 P-384 point, SEC1 uncompressed

A signed report is ``body ‖ r ‖ s`` (ECDSA P-384 over SHA-384 of the body, r and s as
48-byte big-endian integers: fixed length, one encoding per signature). The *report hash*
that key packages are bound to is SHA-384(body).
"""
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from .errors import MalformedReportError, ReportSignatureError
from .measure import DIGEST_SIZE, SLOTS

__all__ = ["AttestationReport", "sign_report", "split_signed_report",
           "verify_report_signature", "report_hash", "SIGNATURE_SIZE", "ECDH_POINT_SIZE"]

_MAGIC, _VERSION = b"ITXR", 1
SIGNATURE_SIZE = 96
ECDH_POINT_SIZE = 97


@dataclass(frozen=True)
class AttestationReport:
    job_id: bytes
    manifest_hash: bytes
    epoch: int
    checkpoint_id: int
    slots: tuple[bytes, ...]
    parties: tuple[tuple[int, bytes], ...]     # (party id, certificate fingerprint)
    ecdh_public: bytes

    def encode(self) -> bytes:
        out = [_MAGIC, struct.pack(">HH", _VERSION, 0), self.job_id, self.manifest_hash,
               struct.pack(">IIH", self.epoch, self.checkpoint_id, len(self.slots)),
               *self.slots, struct.pack(">H", len(self.parties))]
        out += [struct.pack(">H", pid) + fp for pid, fp in self.parties]
        out += [struct.pack(">H", len(self.ecdh_public)), self.ecdh_public]
        return b"".join(out)

    @classmethod
    def decode(cls, body: bytes) -> "AttestationReport":
        """Strict parse; MalformedReportError names the field that does not fit."""
        r = _Reader(body)
        if r.take(4, "magic") != _MAGIC:
            raise MalformedReportError("not an attestation report (bad magic)")
        version, _ = r.unpack(">HH", "version")
        if version != _VERSION:
            raise MalformedReportError(f"report version {version}, expected {_VERSION}")
        job_id, mhash = r.take(16, "job id"), r.take(48, "manifest hash")
        epoch, ckpt, n_slots = r.unpack(">IIH", "epoch/checkpoint")
        if n_slots != SLOTS:
            raise MalformedReportError(f"report has {n_slots} slots, expected {SLOTS}")
        slots = tuple(r.take(DIGEST_SIZE, f"slot {i}") for i in range(n_slots))
        (n_parties,) = r.unpack(">H", "party count")
        parties = tuple((r.unpack(">H", "party id")[0], r.take(48, "fingerprint"))
                        for _ in range(n_parties))
        (n_pub,) = r.unpack(">H", "ECDH key length")
        if n_pub != ECDH_POINT_SIZE:
            raise MalformedReportError(f"ECDH key is {n_pub} bytes, expected {ECDH_POINT_SIZE}")
        pub = r.take(n_pub, "ECDH key")
        if r.pos != len(body):
            raise MalformedReportError(f"{len(body) - r.pos} trailing bytes after the report")
        return cls(job_id, mhash, epoch, ckpt, slots, parties, pub)


class _Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n, what):
        if self.pos + n > len(self.buf):
            raise MalformedReportError(f"report truncated in {what}")
        self.pos += n
        return bytes(self.buf[self.pos - n:self.pos])

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def report_hash(body: bytes) -> bytes:
    return hashlib.sha384(body).digest()


def sign_report(report: AttestationReport, ak: ec.EllipticCurvePrivateKey) -> bytes:
    body = report.encode()
    r, s = decode_dss_signature(ak.sign(body, ec.ECDSA(hashes.SHA384())))
    return body + r.to_bytes(48, "big") + s.to_bytes(48, "big")


def split_signed_report(blob: bytes) -> tuple[bytes, bytes]:
    """(body, signature). Verify the signature *before* decoding the body, so that any
    alteration is reported as such rather than as whichever field it happened to break."""
    if len(blob) <= SIGNATURE_SIZE:
        raise MalformedReportError(f"signed report of {len(blob)} bytes is too short")
    return bytes(blob[:-SIGNATURE_SIZE]), bytes(blob[-SIGNATURE_SIZE:])


def verify_report_signature(body: bytes, signature: bytes, ak_public) -> None:
    r, s = int.from_bytes(signature[:48], "big"), int.from_bytes(signature[48:], "big")
    try:
        ak_public.verify(encode_dss_signature(r, s), body, ec.ECDSA(hashes.SHA384()))
    except (InvalidSignature, ValueError):
        raise ReportSignatureError("report signature does not verify under the AK "
                                   "certificate: the report was altered or not signed "
                                   "by this AK") from None
