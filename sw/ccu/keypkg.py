"""Key packages (party → CCU) and the key derivations of a run.

Wrapping key. The CCU's report carries a fresh P-384 ECDH public key; a party agrees with
it using the private key of its certificate (the one whose fingerprint is in the
manifest), so the shared secret Z authenticates both ends::

    K_wrap = HKDF-SHA384(IKM=Z, salt=report_hash,
                         info="ITX-CCU key package v1" ‖ job_id ‖ u16 party_id, L=32)

Package = header ‖ AES-256-GCM(K_wrap, iv, plaintext, AAD=header). Header (92 bytes,
in clear so the CCU can reject a package before any cryptography)::

    "ITXK" u8 version=1 u8 reserved=0 u16 party_id job_id[16] report_hash[48]
    u64 counter iv[12]

Plaintext::

    job_id[16] u16 party_id u64 counter nonce[32] u8 flags (bit 0: resume nonce present)
    [resume_nonce[32]] u16 n_keys { u16 key_id key[32] }*n_keys      (ascending key ids)

The counter must grow from package to package of one party within one TEE (replay
detection); a later package supersedes an earlier one until launch.

Run keys (``nonces`` = the parties' 32-byte nonces, sorted bytewise, concatenated)::

    K_checkpoint(e)  = HKDF-SHA384(IKM=nonces, salt=job_id,
                                   info="ITX-CCU checkpoint" ‖ u32 e, L=32)
    K_final_model(e) = HKDF-SHA384(IKM=nonces, salt=job_id,
                                   info="ITX-CCU final-model" ‖ u32 e, L=32)

A resuming run at epoch e recomputes K_checkpoint(e-1) from the *resume* nonces: it equals
the earlier run's key only if every party supplies the nonce it gave that run.

Parsing errors (:func:`parse_header`, :func:`decode_plaintext`, :func:`open_package`) are
:mod:`sw.ccu.errors`' key-package errors and nothing else: TruncatedPackageError for bytes
shorter than the structure, MalformedPackageError for anything else that does not parse
(bad magic, version, flags, trailing bytes, key ids, or input that is not bytes),
PackageAuthError for a ciphertext that does not authenticate.
"""
import os
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import MalformedPackageError, PackageAuthError, TruncatedPackageError

__all__ = ["PackageHeader", "KeyPackageContents", "HEADER_SIZE", "NONCE_SIZE",
           "wrapping_key", "seal_package", "parse_header", "open_package",
           "encode_plaintext", "decode_plaintext", "checkpoint_key", "final_model_key"]

_MAGIC, _VERSION = b"ITXK", 1
_HEADER = struct.Struct(">4sBBH16s48sQ12s")
HEADER_SIZE = _HEADER.size
NONCE_SIZE = KEY_SIZE = 32
_TAG_SIZE = 16


@dataclass(frozen=True)
class PackageHeader:
    party_id: int
    job_id: bytes
    report_hash: bytes
    counter: int
    iv: bytes

    def encode(self) -> bytes:
        return _HEADER.pack(_MAGIC, _VERSION, 0, self.party_id, self.job_id,
                            self.report_hash, self.counter, self.iv)


@dataclass(frozen=True)
class KeyPackageContents:
    job_id: bytes
    party_id: int
    counter: int
    nonce: bytes
    keys: tuple[tuple[int, bytes], ...]        # (key id, 32-byte key), ascending ids
    resume_nonce: bytes | None = None


def wrapping_key(shared_secret: bytes, report_hash: bytes, job_id: bytes,
                 party_id: int) -> bytes:
    info = b"ITX-CCU key package v1" + job_id + struct.pack(">H", party_id)
    return HKDF(hashes.SHA384(), 32, report_hash, info).derive(bytes(shared_secret))


def encode_plaintext(c: KeyPackageContents) -> bytes:
    keys = sorted(c.keys)
    out = [c.job_id, struct.pack(">HQ", c.party_id, c.counter), c.nonce,
           bytes([c.resume_nonce is not None]), c.resume_nonce or b"",
           struct.pack(">H", len(keys))]
    out += [struct.pack(">H", kid) + key for kid, key in keys]
    return b"".join(out)


def _check_bytes(blob, what):
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise MalformedPackageError(f"{what} is a {type(blob).__name__}, not bytes")
    return bytes(blob)


def decode_plaintext(pt: bytes) -> KeyPackageContents:
    """The contents of a package plaintext (errors: see the module docstring)."""
    pt = _check_bytes(pt, "key package plaintext")

    def take(n, what):
        nonlocal pos
        if pos + n > len(pt):
            raise TruncatedPackageError(f"key package plaintext truncated in {what}")
        pos += n
        return pt[pos - n:pos]
    pos = 0
    job_id = take(16, "job id")
    party_id, counter = struct.unpack(">HQ", take(10, "party id/counter"))
    nonce, flags = take(NONCE_SIZE, "nonce"), take(1, "flags")[0]
    if flags & ~1:
        raise MalformedPackageError(f"unknown key package flags {flags:#04x}")
    resume = take(NONCE_SIZE, "resume nonce") if flags & 1 else None
    (n,) = struct.unpack(">H", take(2, "key count"))
    keys = tuple(struct.unpack(">H", take(2, "key id")) + (take(KEY_SIZE, "key"),)
                 for _ in range(n))
    if pos != len(pt):
        raise MalformedPackageError(f"{len(pt) - pos} trailing bytes in the key package")
    ids = [k for k, _ in keys]
    if ids != sorted(set(ids)):
        raise MalformedPackageError(f"key ids {ids} are not unique and ascending")
    return KeyPackageContents(job_id, party_id, counter, nonce, keys, resume)


def seal_package(contents: KeyPackageContents, shared_secret: bytes, report_hash: bytes,
                 iv: bytes | None = None, plaintext: bytes | None = None) -> bytes:
    """Wrap ``contents`` (``plaintext`` overrides the encoding: tests use it to send a
    well-authenticated but malformed package)."""
    header = PackageHeader(contents.party_id, contents.job_id, report_hash,
                           contents.counter, iv or os.urandom(12)).encode()
    key = wrapping_key(shared_secret, report_hash, contents.job_id, contents.party_id)
    pt = encode_plaintext(contents) if plaintext is None else plaintext
    return header + AESGCM(key).encrypt(header[-12:], pt, header)


def parse_header(blob: bytes) -> tuple[PackageHeader, bytes]:
    """(header, ciphertext ‖ tag); MalformedPackageError/TruncatedPackageError."""
    blob = _check_bytes(blob, "key package")
    if len(blob) < HEADER_SIZE + _TAG_SIZE:
        raise TruncatedPackageError(f"key package of {len(blob)} bytes is shorter than "
                                    f"header and tag ({HEADER_SIZE + _TAG_SIZE})")
    magic, version, reserved, pid, job, rh, ctr, iv = _HEADER.unpack_from(blob)
    if magic != _MAGIC or version != _VERSION or reserved:
        raise MalformedPackageError(f"not a version-{_VERSION} key package "
                                    f"(magic {magic!r}, version {version})")
    return PackageHeader(pid, job, rh, ctr, iv), bytes(blob[HEADER_SIZE:])


def open_package(header: PackageHeader, ciphertext: bytes,
                 shared_secret: bytes) -> KeyPackageContents:
    """Decrypt and parse a package (errors: see the module docstring)."""
    ciphertext = _check_bytes(ciphertext, "key package ciphertext")
    key = wrapping_key(shared_secret, header.report_hash, header.job_id, header.party_id)
    try:
        pt = AESGCM(key).decrypt(header.iv, ciphertext, header.encode())
    except InvalidTag:
        raise PackageAuthError(f"key package from party {header.party_id} fails "
                               "authentication (altered, or not wrapped with this "
                               "party's key for this report)") from None
    return decode_plaintext(pt)


def _run_key(nonces, job_id: bytes, epoch: int, label: bytes) -> bytearray:
    ikm = b"".join(sorted(bytes(n) for n in nonces))
    return bytearray(HKDF(hashes.SHA384(), 32, job_id,
                          label + struct.pack(">I", epoch)).derive(ikm))


def checkpoint_key(nonces, job_id: bytes, epoch: int) -> bytearray:
    return _run_key(nonces, job_id, epoch, b"ITX-CCU checkpoint")


def final_model_key(nonces, job_id: bytes, epoch: int) -> bytearray:
    return _run_key(nonces, job_id, epoch, b"ITX-CCU final-model")
