"""The opaque data of H100's MEASUREMENTS response, in the format NVIDIA's verifier
(``nv-local-gpu-verifier``, ``verifier/attestation/spdm_msrt_resp_msg.py``, class
``OpaqueData``) reads: a sequence of ``DataType(2) | DataSize(2) | Data`` entries,
little-endian, no padding. This is NVIDIA's own layout, not DSP0274's general opaque data
format (SPDM 1.2 "OpaqueDataFmt1"); DSP0274 leaves MEASUREMENTS opaque data to the device.

The field ids are NVIDIA's (names as in that verifier). The field list and their sizes
follow NVIDIA's sample H100 report shipped with the verifier (the DSP0274 spec and the H100
white paper name none of them).
"""
import enum

from .errors import InvalidFieldError, TruncatedMessageError

__all__ = ["OpaqueField", "encode_opaque", "decode_opaque", "H100_FIELD_ORDER"]


class OpaqueField(enum.IntEnum):
    CERT_ISSUER_NAME = 1
    CERT_AUTHORITY_KEY_IDENTIFIER = 2
    DRIVER_VERSION = 3
    GPU_INFO = 4
    SKU = 5
    VBIOS_VERSION = 6
    MANUFACTURER_ID = 7
    TAMPER_DETECTION = 8
    SMC = 9
    VPR = 10
    NVDEC0_STATUS = 11
    MSRSCNT = 12
    CPRINFO = 13
    BOARD_ID = 14
    CHIP_SKU = 15
    CHIP_SKU_MOD = 16
    PROJECT = 17
    PROJECT_SKU = 18
    PROJECT_SKU_MOD = 19
    FWID = 20
    PROTECTED_PCIE_STATUS = 21
    SWITCH_PDI = 22
    FLOORSWEPT_PORTS = 23
    POSITION_ID = 24
    LOCK_SWITCH_STATUS = 25
    GPU_LINK_CONN = 32
    SYS_ENABLE_STATUS = 33
    OPAQUE_DATA_VERSION = 34
    CHIP_INFO = 35
    FEATURE_FLAG = 36


# The order of NVIDIA's sample H100 report.
H100_FIELD_ORDER = (OpaqueField.VBIOS_VERSION, OpaqueField.BOARD_ID, OpaqueField.CHIP_SKU,
                    OpaqueField.CHIP_SKU_MOD, OpaqueField.PROJECT, OpaqueField.PROJECT_SKU,
                    OpaqueField.PROJECT_SKU_MOD, OpaqueField.DRIVER_VERSION, OpaqueField.GPU_INFO,
                    OpaqueField.MSRSCNT, OpaqueField.CPRINFO, OpaqueField.NVDEC0_STATUS, OpaqueField.FWID,
                    OpaqueField.PROTECTED_PCIE_STATUS)


def encode_opaque(fields) -> bytes:
    """*fields*: a sequence of (field id, bytes) pairs, encoded in that order."""
    out = b""
    for fid, value in fields:
        if not isinstance(fid, int) or not 0 <= fid < 1 << 16:
            raise ValueError(f"opaque field id {fid!r} does not fit 16 bits")
        if not isinstance(value, bytes) or len(value) >= 1 << 16:
            raise ValueError(f"opaque field {fid} must be bytes shorter than 64 KiB")
        out += fid.to_bytes(2, "little") + len(value).to_bytes(2, "little") + value
    return out


def decode_opaque(data: bytes) -> list:
    """Inverse of :func:`encode_opaque`: [(field id, bytes), ...]. Raises
    :class:`~sw.spdm.errors.TruncatedMessageError` when an entry runs past the end and
    :class:`~sw.spdm.errors.InvalidFieldError` for an id NVIDIA's parser does not know
    (it would raise KeyError on one)."""
    out, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise TruncatedMessageError(f"opaque entry header at {pos} runs past the end")
        fid = int.from_bytes(data[pos:pos + 2], "little")
        size = int.from_bytes(data[pos + 2:pos + 4], "little")
        if fid not in OpaqueField.__members__.values() and fid != 255:
            raise InvalidFieldError(f"opaque field id {fid} is not one NVIDIA's verifier knows")
        if pos + 4 + size > len(data):
            raise TruncatedMessageError(f"opaque field {fid} of {size} bytes runs past the end")
        out.append((fid, bytes(data[pos + 4:pos + 4 + size])))
        pos += 4 + size
    return out
