"""Firmware images of the CCU layers and their signatures.

The primary bootloader authenticates the secondary bootloader, and the secondary
bootloader the CCE, with the manufacturer's firmware signing key (ECDSA P-384/SHA-384)
before measuring them. The signed message binds the layer name to the code
(``b"ITX-FW\\0" ‖ name ‖ b"\\0" ‖ code``) so an image signed as one layer cannot be booted
as another. Measurements (the identity inputs) are of the code alone.
"""
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from .errors import FirmwareAuthError

__all__ = ["FirmwareImage", "FirmwareBundle", "sign_firmware", "verify_firmware",
           "SBL", "CCE"]

SBL, CCE = "secondary-bootloader", "cce"


@dataclass(frozen=True)
class FirmwareImage:
    """A signed firmware image: layer name, code, ECDSA signature (DER)."""
    name: str
    code: bytes
    signature: bytes


@dataclass(frozen=True)
class FirmwareBundle:
    """What the CCU flash holds: the two mutable layers, the ICU firmware the secondary
    bootloader measures, and the pre-defined tile bootloader the CCE deploys."""
    sbl: FirmwareImage
    cce: FirmwareImage
    icu_firmware: bytes
    tile_bootloader: bytes


def _message(name: str, code: bytes) -> bytes:
    return b"ITX-FW\0" + name.encode() + b"\0" + code


def sign_firmware(key: ec.EllipticCurvePrivateKey, name: str, code: bytes) -> FirmwareImage:
    return FirmwareImage(name, bytes(code), key.sign(_message(name, code),
                                                     ec.ECDSA(hashes.SHA384())))


def verify_firmware(image: FirmwareImage, public_key, name: str) -> None:
    """FirmwareAuthError unless ``image`` is a correctly signed ``name`` image."""
    if image.name != name:
        raise FirmwareAuthError(f"image is signed as {image.name!r}, expected {name!r}")
    try:
        public_key.verify(image.signature, _message(name, image.code),
                          ec.ECDSA(hashes.SHA384()))
    except InvalidSignature:
        raise FirmwareAuthError(f"{name} image signature does not verify under the "
                                "firmware signing key") from None
