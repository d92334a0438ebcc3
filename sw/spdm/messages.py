"""DMTF DSP0274 (SPDM 1.1 and 1.2) request and response codecs, byte-exact to the spec's
layouts.

Every message is a frozen dataclass with ``encode() -> bytes``; :func:`decode_request`
and :func:`decode_response` turn bytes back into them. All multi-byte integers are
little-endian (DSP0274 "Byte ordering"). Every message starts with the 4-byte header
``SPDMVersion, RequestResponseCode, Param1, Param2``; ``SPDMVersion`` is major in bits
7:4 and minor in bits 3:0 (``0x12`` is 1.2).

Sizes that depend on the negotiated algorithms are those of H100's set, the only one the
model negotiates: hash H = 48 bytes (SHA-384), signature S = 96 bytes (ECDSA P-384,
raw ``r || s``), DHE exchange data D = 96 bytes (secp384r1 ``X || Y``).

Some responses cannot be parsed from their own bytes alone (whether CHALLENGE_AUTH
carries a measurement summary hash, whether MEASUREMENTS carries a signature):
:func:`decode_response` takes the request they answer and reads those facts from it.

Strictness (a decision of this model, see docs/spdm.md): a message must be exactly as
long as its layout and length fields say; bytes left over raise
:class:`~sw.spdm.errors.TrailingBytesError` (libspdm ignores trailing bytes on
fixed-size requests). Reserved fields are written as zero and ignored on decode, as
DSP0274 requires of reserved fields.

Malformed bytes raise a :class:`~sw.spdm.errors.MalformedMessageError` subclass, never
``IndexError`` or ``struct.error``.
"""
import dataclasses
import enum
import struct

from .errors import InvalidFieldError, TrailingBytesError, TruncatedMessageError, UnknownCodeError

__all__ = [
    "HASH_SIZE", "SIGNATURE_SIZE", "DHE_SIZE", "NONCE_SIZE", "RANDOM_SIZE",
    "V10", "V11", "V12", "SUPPORTED_VERSIONS",
    "RequestCode", "ResponseCode", "ErrorCode",
    "Cap", "BaseAsym", "BaseHash", "MeasurementHash", "AlgType", "Dhe", "Aead", "KeySchedule",
    "MEAS_SPEC_DMTF", "SUMMARY_NONE", "SUMMARY_TCB", "SUMMARY_ALL", "MEAS_ALL", "MEAS_COUNT",
    "AlgStruct", "GetVersion", "Version", "GetCapabilities", "Capabilities",
    "NegotiateAlgorithms", "Algorithms", "GetDigests", "Digests", "GetCertificate", "Certificate",
    "Challenge", "ChallengeAuth", "GetMeasurements", "Measurements", "MeasurementBlock",
    "DmtfMeasurement", "KeyExchange", "KeyExchangeRsp", "Finish", "FinishRsp", "ErrorResponse",
    "encode_cert_chain", "decode_cert_chain", "decode_request", "decode_response",
    "version_entry", "version_byte",
]

HASH_SIZE = 48
SIGNATURE_SIZE = 96
DHE_SIZE = 96
NONCE_SIZE = 32
RANDOM_SIZE = 32

V10, V11, V12 = 0x10, 0x11, 0x12
SUPPORTED_VERSIONS = (V11, V12)  # KEY_EXCHANGE needs 1.1; H100's firmware speaks 1.1


class RequestCode(enum.IntEnum):
    GET_DIGESTS = 0x81
    GET_CERTIFICATE = 0x82
    CHALLENGE = 0x83
    GET_VERSION = 0x84
    CHUNK_SEND = 0x85
    CHUNK_GET = 0x86
    GET_MEASUREMENTS = 0xE0
    GET_CAPABILITIES = 0xE1
    NEGOTIATE_ALGORITHMS = 0xE3
    KEY_EXCHANGE = 0xE4
    FINISH = 0xE5
    PSK_EXCHANGE = 0xE6
    PSK_FINISH = 0xE7
    HEARTBEAT = 0xE8
    KEY_UPDATE = 0xE9
    GET_ENCAPSULATED_REQUEST = 0xEA
    DELIVER_ENCAPSULATED_RESPONSE = 0xEB
    END_SESSION = 0xEC
    GET_CSR = 0xED
    SET_CERTIFICATE = 0xEE
    VENDOR_DEFINED_REQUEST = 0xFE
    RESPOND_IF_READY = 0xFF


class ResponseCode(enum.IntEnum):
    DIGESTS = 0x01
    CERTIFICATE = 0x02
    CHALLENGE_AUTH = 0x03
    VERSION = 0x04
    MEASUREMENTS = 0x60
    CAPABILITIES = 0x61
    ALGORITHMS = 0x63
    KEY_EXCHANGE_RSP = 0x64
    FINISH_RSP = 0x65
    VENDOR_DEFINED_RESPONSE = 0x7E
    ERROR = 0x7F


class ErrorCode(enum.IntEnum):
    """ERROR response codes (DSP0274 1.2 table "Error code and error data")."""
    INVALID_REQUEST = 0x01
    INVALID_SESSION = 0x02  # SPDM 1.1 only; reserved in 1.2
    BUSY = 0x03
    UNEXPECTED_REQUEST = 0x04
    UNSPECIFIED = 0x05
    DECRYPT_ERROR = 0x06
    UNSUPPORTED_REQUEST = 0x07
    REQUEST_IN_FLIGHT = 0x08
    INVALID_RESPONSE_CODE = 0x09
    SESSION_LIMIT_EXCEEDED = 0x0A
    SESSION_REQUIRED = 0x0B
    RESET_REQUIRED = 0x0C
    RESPONSE_TOO_LARGE = 0x0D
    REQUEST_TOO_LARGE = 0x0E
    LARGE_RESPONSE = 0x0F
    MESSAGE_LOST = 0x10
    VERSION_MISMATCH = 0x41
    RESPONSE_NOT_READY = 0x42
    REQUEST_RESYNCH = 0x43
    VENDOR_DEFINED = 0xFF


class Cap(enum.IntFlag):
    """CAPABILITIES flags (responder's meaning; the requester's use the same bits)."""
    CACHE = 1 << 0
    CERT = 1 << 1
    CHAL = 1 << 2
    MEAS_NO_SIG = 1 << 3   # MEAS_CAP = 01b
    MEAS_SIG = 1 << 4      # MEAS_CAP = 10b
    MEAS_FRESH = 1 << 5
    ENCRYPT = 1 << 6
    MAC = 1 << 7
    MUT_AUTH = 1 << 8
    KEY_EX = 1 << 9
    PSK = 1 << 10
    ENCAP = 1 << 12
    HBEAT = 1 << 13
    KEY_UPD = 1 << 14
    HANDSHAKE_IN_THE_CLEAR = 1 << 15
    PUB_KEY_ID = 1 << 16
    CHUNK = 1 << 17


class BaseAsym(enum.IntFlag):
    RSASSA_2048 = 1 << 0
    RSAPSS_2048 = 1 << 1
    RSASSA_3072 = 1 << 2
    RSAPSS_3072 = 1 << 3
    ECDSA_P256 = 1 << 4
    RSASSA_4096 = 1 << 5
    RSAPSS_4096 = 1 << 6
    ECDSA_P384 = 1 << 7   # TPM_ALG_ECDSA_ECC_NIST_P384
    ECDSA_P521 = 1 << 8
    SM2_P256 = 1 << 9
    EDDSA_25519 = 1 << 10
    EDDSA_448 = 1 << 11


class BaseHash(enum.IntFlag):
    SHA_256 = 1 << 0
    SHA_384 = 1 << 1      # TPM_ALG_SHA_384
    SHA_512 = 1 << 2
    SHA3_256 = 1 << 3
    SHA3_384 = 1 << 4
    SHA3_512 = 1 << 5
    SM3_256 = 1 << 6


class MeasurementHash(enum.IntFlag):
    RAW_BIT_STREAM = 1 << 0
    SHA_256 = 1 << 1
    SHA_384 = 1 << 2
    SHA_512 = 1 << 3


class AlgType(enum.IntEnum):
    DHE = 2
    AEAD = 3
    REQ_BASE_ASYM = 4
    KEY_SCHEDULE = 5


class Dhe(enum.IntFlag):
    FFDHE_2048 = 1 << 0
    FFDHE_3072 = 1 << 1
    FFDHE_4096 = 1 << 2
    SECP256R1 = 1 << 3
    SECP384R1 = 1 << 4
    SECP521R1 = 1 << 5
    SM2_P256 = 1 << 6


class Aead(enum.IntFlag):
    AES_128_GCM = 1 << 0
    AES_256_GCM = 1 << 1
    CHACHA20_POLY1305 = 1 << 2
    SM4_GCM = 1 << 3


class KeySchedule(enum.IntFlag):
    SPDM = 1 << 0


MEAS_SPEC_DMTF = 0x01
SUMMARY_NONE, SUMMARY_TCB, SUMMARY_ALL = 0x00, 0x01, 0xFF
MEAS_COUNT, MEAS_ALL = 0x00, 0xFF


def version_entry(version_byte_value: int) -> int:
    """The 16-bit VersionNumberEntry of an SPDMVersion byte (0x12 -> 0x1200)."""
    return version_byte_value << 8


def version_byte(entry: int) -> int:
    """The SPDMVersion byte of a VersionNumberEntry (update and alpha nibbles dropped)."""
    return (entry >> 8) & 0xFF


# --- byte helpers ------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes, what: str):
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TruncatedMessageError(
                f"{self.what}: needs {n} more bytes at offset {self.pos}, has {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "little")

    def u24(self) -> int:
        return int.from_bytes(self.take(3), "little")

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "little")

    def end(self):
        if self.pos != len(self.data):
            raise TrailingBytesError(f"{self.what}: {len(self.data) - self.pos} bytes after the end of the layout")


def _check_bytes(name, value, size=None, max_size=None):
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}")
    if size is not None and len(value) != size:
        raise ValueError(f"{name} must be {size} bytes, not {len(value)}")
    if max_size is not None and len(value) > max_size:
        raise ValueError(f"{name} is {len(value)} bytes, at most {max_size} fit")


def _check_int(name, value, bits):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{name} = {value} does not fit {bits} bits")


def _check_version(version):
    _check_int("version", version, 8)
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"version 0x{version:02x} is not one the codecs lay out (1.1, 1.2)")


def _header(version, code, p1=0, p2=0):
    return bytes((version, code, p1, p2))


# --- VERSION -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GetVersion:
    """GET_VERSION: header only; SPDMVersion is always 0x10 (DSP0274 "GET_VERSION")."""
    version: int = V10
    CODE = RequestCode.GET_VERSION

    def __post_init__(self):
        _check_int("version", self.version, 8)

    def encode(self):
        return _header(self.version, self.CODE)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        r.end()
        return cls(version)


@dataclasses.dataclass(frozen=True)
class Version:
    """VERSION: Reserved(1), VersionNumberEntryCount(1), VersionNumberEntry[n] (2 each)."""
    entries: tuple = (version_entry(V11), version_entry(V12))
    CODE = ResponseCode.VERSION

    def __post_init__(self):
        if not isinstance(self.entries, tuple):
            raise TypeError("entries must be a tuple of 16-bit ints")
        for e in self.entries:
            _check_int("version entry", e, 16)
        if len(self.entries) > 255:
            raise ValueError("at most 255 version entries")

    def encode(self):
        return (_header(V10, self.CODE) + bytes((0, len(self.entries)))
                + b"".join(e.to_bytes(2, "little") for e in self.entries))

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        if version != V10:
            raise InvalidFieldError(f"VERSION carries SPDMVersion 0x{version:02x}, not 0x10")
        r.u8()
        n = r.u8()
        entries = tuple(r.u16() for _ in range(n))
        r.end()
        return cls(entries)


# --- CAPABILITIES ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _CapsBase:
    """GET_CAPABILITIES / CAPABILITIES: Reserved(1), CTExponent(1), Reserved(2), Flags(4);
    from 1.2 also DataTransferSize(4), MaxSPDMmsgSize(4)."""
    version: int
    ct_exponent: int = 0
    flags: int = 0
    data_transfer_size: int = 0
    max_spdm_msg_size: int = 0

    def __post_init__(self):
        _check_version(self.version)
        _check_int("ct_exponent", self.ct_exponent, 8)
        _check_int("flags", self.flags, 32)
        _check_int("data_transfer_size", self.data_transfer_size, 32)
        _check_int("max_spdm_msg_size", self.max_spdm_msg_size, 32)
        if self.version == V11 and (self.data_transfer_size, self.max_spdm_msg_size) != (0, 0):
            raise ValueError("SPDM 1.1 capabilities have no DataTransferSize / MaxSPDMmsgSize (give 0)")

    def encode(self):
        out = _header(self.version, self.CODE) + bytes((0, self.ct_exponent, 0, 0)) + struct.pack("<I", self.flags)
        if self.version >= V12:
            out += struct.pack("<II", self.data_transfer_size, self.max_spdm_msg_size)
        return out

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        if version not in SUPPORTED_VERSIONS:
            raise InvalidFieldError(f"no {cls.__name__} layout for SPDMVersion 0x{version:02x}")
        r.u8()
        ct = r.u8()
        r.take(2)
        flags = r.u32()
        dts = mms = 0
        if version >= V12:
            dts, mms = r.u32(), r.u32()
        r.end()
        return cls(version, ct, flags, dts, mms)


@dataclasses.dataclass(frozen=True)
class GetCapabilities(_CapsBase):
    CODE = RequestCode.GET_CAPABILITIES


@dataclasses.dataclass(frozen=True)
class Capabilities(_CapsBase):
    CODE = ResponseCode.CAPABILITIES


# --- ALGORITHMS --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class AlgStruct:
    """ReqAlgStruct / RespAlgStruct: AlgType(1), AlgCount(1) = (2 << 4) | ExtAlgCount,
    AlgSupported(2), AlgExternal[ExtAlgCount] (4 each)."""
    alg_type: int
    supported: int
    external: tuple = ()

    def __post_init__(self):
        _check_int("alg_type", self.alg_type, 8)
        _check_int("supported", self.supported, 16)
        if not isinstance(self.external, tuple) or len(self.external) > 15:
            raise ValueError("external must be a tuple of at most 15 32-bit ints")
        for e in self.external:
            _check_int("external algorithm", e, 32)

    def encode(self):
        return (bytes((self.alg_type, (2 << 4) | len(self.external))) + struct.pack("<H", self.supported)
                + b"".join(struct.pack("<I", e) for e in self.external))

    @classmethod
    def read(cls, r):
        alg_type = r.u8()
        count = r.u8()
        if count >> 4 != 2:
            raise InvalidFieldError(f"AlgCount 0x{count:02x}: fixed algorithm field is not 2 bytes")
        supported = r.u16()
        external = tuple(r.u32() for _ in range(count & 0xF))
        return cls(alg_type, supported, external)


def _check_structs(structs):
    if not isinstance(structs, tuple) or not all(isinstance(s, AlgStruct) for s in structs):
        raise TypeError("alg_structs must be a tuple of AlgStruct")
    if len(structs) > 255:
        raise ValueError("at most 255 algorithm structures")


def _check_ext(name, ext):
    if not isinstance(ext, tuple) or len(ext) > 255:
        raise ValueError(f"{name} must be a tuple of at most 255 32-bit ints")
    for e in ext:
        _check_int(name, e, 32)


@dataclasses.dataclass(frozen=True)
class NegotiateAlgorithms:
    """NEGOTIATE_ALGORITHMS: Param1 = number of ReqAlgStruct; Length(2),
    MeasurementSpecification(1), OtherParamsSupport(1), BaseAsymAlgo(4), BaseHashAlgo(4),
    Reserved(12), ExtAsymCount(1), ExtHashCount(1), Reserved(2), ExtAsym[], ExtHash[],
    ReqAlgStruct[]."""
    version: int
    measurement_spec: int = MEAS_SPEC_DMTF
    other_params: int = 0
    base_asym: int = BaseAsym.ECDSA_P384
    base_hash: int = BaseHash.SHA_384
    alg_structs: tuple = ()
    ext_asym: tuple = ()
    ext_hash: tuple = ()
    CODE = RequestCode.NEGOTIATE_ALGORITHMS
    FIXED = 32

    def __post_init__(self):
        _check_version(self.version)
        _check_int("measurement_spec", self.measurement_spec, 8)
        _check_int("other_params", self.other_params, 8)
        _check_int("base_asym", self.base_asym, 32)
        _check_int("base_hash", self.base_hash, 32)
        _check_structs(self.alg_structs)
        _check_ext("ext_asym", self.ext_asym)
        _check_ext("ext_hash", self.ext_hash)

    def _body(self):
        return (struct.pack("<BBII", self.measurement_spec, self.other_params, self.base_asym, self.base_hash)
                + bytes(12) + bytes((len(self.ext_asym), len(self.ext_hash), 0, 0))
                + b"".join(struct.pack("<I", e) for e in self.ext_asym + self.ext_hash)
                + b"".join(s.encode() for s in self.alg_structs))

    def encode(self):
        body = self._body()
        return _header(self.version, self.CODE, len(self.alg_structs)) + struct.pack("<H", 6 + len(body)) + body

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        if version not in SUPPORTED_VERSIONS:
            raise InvalidFieldError(f"no NEGOTIATE_ALGORITHMS layout for SPDMVersion 0x{version:02x}")
        length = r.u16()
        if length != len(r.data):
            raise InvalidFieldError(f"Length field {length} is not the message length {len(r.data)}")
        spec, other, asym, hsh = r.u8(), r.u8(), r.u32(), r.u32()
        r.take(12)
        n_asym, n_hash = r.u8(), r.u8()
        r.take(2)
        ext_asym = tuple(r.u32() for _ in range(n_asym))
        ext_hash = tuple(r.u32() for _ in range(n_hash))
        structs = tuple(AlgStruct.read(r) for _ in range(p1))
        r.end()
        return cls(version, spec, other, asym, hsh, structs, ext_asym, ext_hash)


@dataclasses.dataclass(frozen=True)
class Algorithms:
    """ALGORITHMS: Param1 = number of RespAlgStruct; Length(2),
    MeasurementSpecificationSel(1), OtherParamsSelection(1), MeasurementHashAlgo(4),
    BaseAsymSel(4), BaseHashSel(4), Reserved(12), ExtAsymSelCount(1), ExtHashSelCount(1),
    Reserved(2), ExtAsymSel[], ExtHashSel[], RespAlgStruct[]."""
    version: int
    measurement_spec: int = MEAS_SPEC_DMTF
    other_params: int = 0
    measurement_hash: int = MeasurementHash.SHA_384
    base_asym: int = BaseAsym.ECDSA_P384
    base_hash: int = BaseHash.SHA_384
    alg_structs: tuple = ()
    ext_asym: tuple = ()
    ext_hash: tuple = ()
    CODE = ResponseCode.ALGORITHMS

    def __post_init__(self):
        _check_version(self.version)
        for name in ("measurement_spec", "other_params"):
            _check_int(name, getattr(self, name), 8)
        for name in ("measurement_hash", "base_asym", "base_hash"):
            _check_int(name, getattr(self, name), 32)
        _check_structs(self.alg_structs)
        _check_ext("ext_asym", self.ext_asym)
        _check_ext("ext_hash", self.ext_hash)

    def encode(self):
        body = (struct.pack("<BBIII", self.measurement_spec, self.other_params, self.measurement_hash,
                            self.base_asym, self.base_hash)
                + bytes(12) + bytes((len(self.ext_asym), len(self.ext_hash), 0, 0))
                + b"".join(struct.pack("<I", e) for e in self.ext_asym + self.ext_hash)
                + b"".join(s.encode() for s in self.alg_structs))
        return _header(self.version, self.CODE, len(self.alg_structs)) + struct.pack("<H", 6 + len(body)) + body

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        if version not in SUPPORTED_VERSIONS:
            raise InvalidFieldError(f"no ALGORITHMS layout for SPDMVersion 0x{version:02x}")
        length = r.u16()
        if length != len(r.data):
            raise InvalidFieldError(f"Length field {length} is not the message length {len(r.data)}")
        spec, other, mhash, asym, hsh = r.u8(), r.u8(), r.u32(), r.u32(), r.u32()
        r.take(12)
        n_asym, n_hash = r.u8(), r.u8()
        r.take(2)
        ext_asym = tuple(r.u32() for _ in range(n_asym))
        ext_hash = tuple(r.u32() for _ in range(n_hash))
        structs = tuple(AlgStruct.read(r) for _ in range(p1))
        r.end()
        return cls(version, spec, other, mhash, asym, hsh, structs, ext_asym, ext_hash)


# --- DIGESTS / CERTIFICATE ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _HeaderOnly:
    """A message that is its 4-byte header (Param1 = Param2 = 0); ``CODE`` per subclass."""
    version: int

    def __post_init__(self):
        _check_version(self.version)

    def encode(self):
        return _header(self.version, self.CODE)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        r.end()
        return cls(version)


@dataclasses.dataclass(frozen=True)
class GetDigests(_HeaderOnly):
    """GET_DIGESTS: header only."""
    CODE = RequestCode.GET_DIGESTS


@dataclasses.dataclass(frozen=True)
class Digests:
    """DIGESTS: Param2 = SlotMask; Digest[H] for each bit set in SlotMask, lowest slot first."""
    version: int
    slot_mask: int
    digests: tuple
    CODE = ResponseCode.DIGESTS

    def __post_init__(self):
        _check_version(self.version)
        _check_int("slot_mask", self.slot_mask, 8)
        if not isinstance(self.digests, tuple) or len(self.digests) != bin(self.slot_mask).count("1"):
            raise ValueError("digests must be a tuple with one digest per slot in slot_mask")
        for d in self.digests:
            _check_bytes("digest", d, HASH_SIZE)

    def encode(self):
        return _header(self.version, self.CODE, 0, self.slot_mask) + b"".join(self.digests)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        digests = tuple(r.take(HASH_SIZE) for _ in range(bin(p2).count("1")))
        r.end()
        return cls(version, p2, digests)


@dataclasses.dataclass(frozen=True)
class GetCertificate:
    """GET_CERTIFICATE: Param1 bits 3:0 = SlotID; Offset(2), Length(2)."""
    version: int
    slot: int = 0
    offset: int = 0
    length: int = 0xFFFF
    CODE = RequestCode.GET_CERTIFICATE

    def __post_init__(self):
        _check_version(self.version)
        _check_int("slot", self.slot, 4)
        _check_int("offset", self.offset, 16)
        _check_int("length", self.length, 16)

    def encode(self):
        return _header(self.version, self.CODE, self.slot) + struct.pack("<HH", self.offset, self.length)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        offset, length = r.u16(), r.u16()
        r.end()
        return cls(version, p1 & 0xF, offset, length)


@dataclasses.dataclass(frozen=True)
class Certificate:
    """CERTIFICATE: Param1 bits 3:0 = SlotID; PortionLength(2), RemainderLength(2),
    CertChain[PortionLength]."""
    version: int
    slot: int
    portion: bytes
    remainder_length: int
    CODE = ResponseCode.CERTIFICATE

    def __post_init__(self):
        _check_version(self.version)
        _check_int("slot", self.slot, 4)
        _check_bytes("portion", self.portion, max_size=0xFFFF)
        _check_int("remainder_length", self.remainder_length, 16)

    def encode(self):
        return (_header(self.version, self.CODE, self.slot)
                + struct.pack("<HH", len(self.portion), self.remainder_length) + bytes(self.portion))

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        n, rem = r.u16(), r.u16()
        portion = r.take(n)
        r.end()
        return cls(version, p1 & 0xF, portion, rem)


def encode_cert_chain(root_der: bytes, certs_der: list) -> bytes:
    """The SPDM certificate chain: Length(2) (the whole chain, this header included),
    Reserved(2), RootHash(H) = SHA-384 of the root certificate's DER, then every
    certificate's DER, root first, leaf last."""
    import hashlib
    body = hashlib.sha384(root_der).digest() + b"".join(certs_der)
    total = 4 + len(body)
    if total > 0xFFFF:
        raise ValueError(f"certificate chain of {total} bytes does not fit the 16-bit Length field")
    return struct.pack("<HH", total, 0) + body


def decode_cert_chain(chain: bytes):
    """Split an SPDM certificate chain into (root_hash, [certificate DER, ...]).
    The certificates are split by their outer DER length; raises
    :class:`~sw.spdm.errors.MalformedMessageError` subclasses on anything that does not
    fit (Length field, truncated DER header, trailing bytes)."""
    r = _Reader(bytes(chain), "certificate chain")
    length = r.u16()
    if length != len(chain):
        raise InvalidFieldError(f"certificate chain Length {length} is not its size {len(chain)}")
    r.take(2)
    root_hash = r.take(HASH_SIZE)
    certs = []
    while r.pos < len(r.data):
        start = r.pos
        if r.u8() != 0x30:
            raise InvalidFieldError(f"certificate at offset {start} does not start with a DER SEQUENCE")
        first = r.u8()
        if first < 0x80:
            n = first
        elif first in (0x81, 0x82, 0x83):
            n = int.from_bytes(r.take(first & 0x7F), "big")
        else:
            raise InvalidFieldError(f"certificate at offset {start}: unsupported DER length 0x{first:02x}")
        r.take(n)
        certs.append(r.data[start:r.pos])
    if not certs:
        raise InvalidFieldError("certificate chain holds no certificate")
    return root_hash, certs


# --- CHALLENGE ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Challenge:
    """CHALLENGE: Param1 = SlotID, Param2 = MeasurementSummaryHashType; Nonce(32)."""
    version: int
    slot: int
    summary_type: int
    nonce: bytes
    CODE = RequestCode.CHALLENGE

    def __post_init__(self):
        _check_version(self.version)
        _check_int("slot", self.slot, 8)
        _check_int("summary_type", self.summary_type, 8)
        _check_bytes("nonce", self.nonce, NONCE_SIZE)

    def encode(self):
        return _header(self.version, self.CODE, self.slot, self.summary_type) + bytes(self.nonce)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        nonce = r.take(NONCE_SIZE)
        r.end()
        return cls(version, p1, p2, nonce)


@dataclasses.dataclass(frozen=True)
class ChallengeAuth:
    """CHALLENGE_AUTH: Param1 bits 3:0 = SlotID, Param2 = SlotMask; CertChainHash(H),
    Nonce(32), MeasurementSummaryHash(H, or absent when the CHALLENGE asked for none),
    OpaqueDataLength(2), OpaqueData, Signature(S)."""
    version: int
    slot: int
    slot_mask: int
    cert_chain_hash: bytes
    nonce: bytes
    summary_hash: bytes
    opaque: bytes
    signature: bytes
    CODE = ResponseCode.CHALLENGE_AUTH

    def __post_init__(self):
        _check_version(self.version)
        _check_int("slot", self.slot, 4)
        _check_int("slot_mask", self.slot_mask, 8)
        _check_bytes("cert_chain_hash", self.cert_chain_hash, HASH_SIZE)
        _check_bytes("nonce", self.nonce, NONCE_SIZE)
        _check_bytes("summary_hash", self.summary_hash)
        if len(self.summary_hash) not in (0, HASH_SIZE):
            raise ValueError("summary_hash is empty or H bytes")
        _check_bytes("opaque", self.opaque, max_size=1024)
        _check_bytes("signature", self.signature, SIGNATURE_SIZE)

    def encode_unsigned(self):
        """The message up to (not including) the signature: what the transcript holds."""
        return (_header(self.version, self.CODE, self.slot, self.slot_mask) + bytes(self.cert_chain_hash)
                + bytes(self.nonce) + bytes(self.summary_hash) + struct.pack("<H", len(self.opaque))
                + bytes(self.opaque))

    def encode(self):
        return self.encode_unsigned() + bytes(self.signature)

    @classmethod
    def _decode(cls, r, version, p1, p2, request=None, **_):
        summary = request is not None and request.summary_type != SUMMARY_NONE
        chain_hash = r.take(HASH_SIZE)
        nonce = r.take(NONCE_SIZE)
        summary_hash = r.take(HASH_SIZE) if summary else b""
        opaque = r.take(r.u16())
        if len(opaque) > 1024:
            raise InvalidFieldError(f"OpaqueDataLength {len(opaque)} exceeds 1024")
        signature = r.take(SIGNATURE_SIZE)
        r.end()
        return cls(version, p1 & 0xF, p2, chain_hash, nonce, summary_hash, opaque, signature)


# --- MEASUREMENTS ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DmtfMeasurement:
    """The DMTF measurement (MeasurementSpecification bit 0): DMTFSpecMeasurementValueType(1)
    (bit 7: raw bit stream, bits 6:0: the kind, e.g. 0 immutable ROM, 1 mutable
    firmware, 2 hardware config, 3 firmware config), DMTFSpecMeasurementValueSize(2),
    DMTFSpecMeasurementValue."""
    value_type: int
    value: bytes

    def __post_init__(self):
        _check_int("value_type", self.value_type, 8)
        _check_bytes("value", self.value, max_size=0xFFFF - 3)

    def encode(self):
        return bytes((self.value_type,)) + struct.pack("<H", len(self.value)) + bytes(self.value)

    @classmethod
    def decode(cls, data):
        r = _Reader(bytes(data), "DMTF measurement")
        t = r.u8()
        value = r.take(r.u16())
        r.end()
        return cls(t, value)


@dataclasses.dataclass(frozen=True)
class MeasurementBlock:
    """A measurement block: Index(1), MeasurementSpecification(1), MeasurementSize(2),
    Measurement[MeasurementSize]."""
    index: int
    measurement: bytes
    spec: int = MEAS_SPEC_DMTF

    def __post_init__(self):
        _check_int("index", self.index, 8)
        _check_int("spec", self.spec, 8)
        _check_bytes("measurement", self.measurement, max_size=0xFFFF)

    @classmethod
    def dmtf(cls, index, value_type, value):
        return cls(index, DmtfMeasurement(value_type, value).encode())

    def dmtf_value(self) -> DmtfMeasurement:
        if self.spec != MEAS_SPEC_DMTF:
            raise InvalidFieldError(f"block {self.index} is not in the DMTF format (spec 0x{self.spec:02x})")
        return DmtfMeasurement.decode(self.measurement)

    def encode(self):
        return bytes((self.index, self.spec)) + struct.pack("<H", len(self.measurement)) + bytes(self.measurement)

    @classmethod
    def read(cls, r):
        index, spec = r.u8(), r.u8()
        return cls(index, r.take(r.u16()), spec)


@dataclasses.dataclass(frozen=True)
class GetMeasurements:
    """GET_MEASUREMENTS: Param1 bit 0 = signature requested (1.2: bit 1 raw bit stream
    requested), Param2 = MeasurementOperation (0: count, 1..0xFE: one index, 0xFF: all);
    Nonce(32) and SlotIDParam(1) only when a signature is requested."""
    version: int
    signed: bool
    operation: int
    nonce: bytes = b""
    slot: int = 0
    raw_bit_stream: bool = False
    CODE = RequestCode.GET_MEASUREMENTS

    def __post_init__(self):
        _check_version(self.version)
        if not isinstance(self.signed, bool) or not isinstance(self.raw_bit_stream, bool):
            raise TypeError("signed and raw_bit_stream are bools")
        _check_int("operation", self.operation, 8)
        _check_int("slot", self.slot, 4)
        _check_bytes("nonce", self.nonce, NONCE_SIZE if self.signed else 0)
        if self.raw_bit_stream and self.version < V12:
            raise ValueError("raw bit stream requests need SPDM 1.2")
        if not self.signed and self.slot:
            raise ValueError("SlotIDParam is only sent with a signature request")

    def encode(self):
        p1 = int(self.signed) | (int(self.raw_bit_stream) << 1)
        out = _header(self.version, self.CODE, p1, self.operation)
        if self.signed:
            out += bytes(self.nonce) + bytes((self.slot,))
        return out

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        signed = bool(p1 & 1)
        raw = bool(p1 & 2) and version >= V12
        nonce, slot = b"", 0
        if signed:
            nonce = r.take(NONCE_SIZE)
            slot = r.u8() & 0xF
        r.end()
        return cls(version, signed, p2, nonce, slot, raw)


@dataclasses.dataclass(frozen=True)
class Measurements:
    """MEASUREMENTS: Param1 = NumberOfIndices (for operation 0, else 0), Param2 bits 3:0 =
    SlotID (1.2: bits 5:4 content changed); NumberOfBlocks(1), MeasurementRecordLength(3),
    MeasurementRecord, Nonce(32), OpaqueDataLength(2), OpaqueData, Signature(S, only
    when the request asked for one)."""
    version: int
    number_of_indices: int
    slot: int
    blocks: tuple
    nonce: bytes
    opaque: bytes = b""
    signature: bytes = b""
    content_changed: int = 0
    CODE = ResponseCode.MEASUREMENTS

    def __post_init__(self):
        _check_version(self.version)
        _check_int("number_of_indices", self.number_of_indices, 8)
        _check_int("slot", self.slot, 4)
        _check_int("content_changed", self.content_changed, 2)
        if not isinstance(self.blocks, tuple) or not all(isinstance(b, MeasurementBlock) for b in self.blocks):
            raise TypeError("blocks must be a tuple of MeasurementBlock")
        if len(self.blocks) > 255:
            raise ValueError("at most 255 measurement blocks")
        _check_bytes("nonce", self.nonce, NONCE_SIZE)
        _check_bytes("opaque", self.opaque, max_size=1024)
        _check_bytes("signature", self.signature)
        if len(self.signature) not in (0, SIGNATURE_SIZE):
            raise ValueError("signature is empty or S bytes")

    def record(self):
        return b"".join(b.encode() for b in self.blocks)

    def encode_unsigned(self):
        record = self.record()
        if len(record) >= 1 << 24:
            raise ValueError("measurement record does not fit its 3-byte length")
        p2 = self.slot | (self.content_changed << 4)
        return (_header(self.version, self.CODE, self.number_of_indices, p2) + bytes((len(self.blocks),))
                + len(record).to_bytes(3, "little") + record + bytes(self.nonce)
                + struct.pack("<H", len(self.opaque)) + bytes(self.opaque))

    def encode(self):
        return self.encode_unsigned() + bytes(self.signature)

    @classmethod
    def _decode(cls, r, version, p1, p2, request=None, **_):
        signed = request is not None and request.signed
        n_blocks = r.u8()
        record = _Reader(r.take(r.u24()), "measurement record")
        blocks = tuple(MeasurementBlock.read(record) for _ in range(n_blocks))
        record.end()
        nonce = r.take(NONCE_SIZE)
        opaque = r.take(r.u16())
        if len(opaque) > 1024:
            raise InvalidFieldError(f"OpaqueDataLength {len(opaque)} exceeds 1024")
        signature = r.take(SIGNATURE_SIZE) if signed else b""
        r.end()
        changed = (p2 >> 4) & 3 if version >= V12 else 0
        return cls(version, p1, p2 & 0xF, blocks, nonce, opaque, signature, changed)


# --- KEY_EXCHANGE / FINISH ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class KeyExchange:
    """KEY_EXCHANGE: Param1 = MeasurementSummaryHashType, Param2 = SlotID; ReqSessionID(2),
    SessionPolicy(1) (1.2; reserved in 1.1), Reserved(1), RandomData(32), ExchangeData(D),
    OpaqueDataLength(2), OpaqueData."""
    version: int
    summary_type: int
    slot: int
    req_session_id: int
    random: bytes
    exchange: bytes
    opaque: bytes = b""
    session_policy: int = 0
    CODE = RequestCode.KEY_EXCHANGE

    def __post_init__(self):
        _check_version(self.version)
        _check_int("summary_type", self.summary_type, 8)
        _check_int("slot", self.slot, 8)
        _check_int("req_session_id", self.req_session_id, 16)
        _check_int("session_policy", self.session_policy, 8)
        if self.version < V12 and self.session_policy:
            raise ValueError("SessionPolicy is reserved in SPDM 1.1")
        _check_bytes("random", self.random, RANDOM_SIZE)
        _check_bytes("exchange", self.exchange, DHE_SIZE)
        _check_bytes("opaque", self.opaque, max_size=1024)

    def encode(self):
        return (_header(self.version, self.CODE, self.summary_type, self.slot)
                + struct.pack("<HBB", self.req_session_id, self.session_policy, 0) + bytes(self.random)
                + bytes(self.exchange) + struct.pack("<H", len(self.opaque)) + bytes(self.opaque))

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        sid = r.u16()
        policy = r.u8()
        if version < V12:
            policy = 0  # reserved in 1.1: ignored
        r.u8()
        random = r.take(RANDOM_SIZE)
        exchange = r.take(DHE_SIZE)
        opaque = r.take(r.u16())
        if len(opaque) > 1024:
            raise InvalidFieldError(f"OpaqueDataLength {len(opaque)} exceeds 1024")
        r.end()
        return cls(version, p1, p2, sid, random, exchange, opaque, policy)


@dataclasses.dataclass(frozen=True)
class KeyExchangeRsp:
    """KEY_EXCHANGE_RSP: Param1 = HeartbeatPeriod; RspSessionID(2), MutAuthRequested(1),
    ReqSlotIDParam(1), RandomData(32), ExchangeData(D), MeasurementSummaryHash(H, absent
    when the request asked for none), OpaqueDataLength(2), OpaqueData, Signature(S),
    ResponderVerifyData(H) (present because the model never negotiates
    HANDSHAKE_IN_THE_CLEAR)."""
    version: int
    rsp_session_id: int
    random: bytes
    exchange: bytes
    summary_hash: bytes
    opaque: bytes
    signature: bytes
    verify_data: bytes
    heartbeat_period: int = 0
    mut_auth_requested: int = 0
    req_slot_id: int = 0
    CODE = ResponseCode.KEY_EXCHANGE_RSP

    def __post_init__(self):
        _check_version(self.version)
        _check_int("rsp_session_id", self.rsp_session_id, 16)
        for name in ("heartbeat_period", "mut_auth_requested", "req_slot_id"):
            _check_int(name, getattr(self, name), 8)
        _check_bytes("random", self.random, RANDOM_SIZE)
        _check_bytes("exchange", self.exchange, DHE_SIZE)
        _check_bytes("summary_hash", self.summary_hash)
        if len(self.summary_hash) not in (0, HASH_SIZE):
            raise ValueError("summary_hash is empty or H bytes")
        _check_bytes("opaque", self.opaque, max_size=1024)
        _check_bytes("signature", self.signature, SIGNATURE_SIZE)
        _check_bytes("verify_data", self.verify_data, HASH_SIZE)

    def encode_unsigned(self):
        """Up to (not including) the signature: the part the signature covers."""
        return (_header(self.version, self.CODE, self.heartbeat_period)
                + struct.pack("<HBB", self.rsp_session_id, self.mut_auth_requested, self.req_slot_id)
                + bytes(self.random) + bytes(self.exchange) + bytes(self.summary_hash)
                + struct.pack("<H", len(self.opaque)) + bytes(self.opaque))

    def encode(self):
        return self.encode_unsigned() + bytes(self.signature) + bytes(self.verify_data)

    @classmethod
    def _decode(cls, r, version, p1, p2, request=None, **_):
        summary = request is not None and request.summary_type != SUMMARY_NONE
        sid, mut, req_slot = r.u16(), r.u8(), r.u8()
        random = r.take(RANDOM_SIZE)
        exchange = r.take(DHE_SIZE)
        summary_hash = r.take(HASH_SIZE) if summary else b""
        opaque = r.take(r.u16())
        if len(opaque) > 1024:
            raise InvalidFieldError(f"OpaqueDataLength {len(opaque)} exceeds 1024")
        signature = r.take(SIGNATURE_SIZE)
        verify = r.take(HASH_SIZE)
        r.end()
        return cls(version, sid, random, exchange, summary_hash, opaque, signature, verify, p1, mut, req_slot)


@dataclasses.dataclass(frozen=True)
class Finish:
    """FINISH: Param1 bit 0 = signature included (mutual authentication), Param2 =
    ReqSlotID; Signature(S, only with bit 0), RequesterVerifyData(H)."""
    version: int
    verify_data: bytes
    signature: bytes = b""
    req_slot_id: int = 0
    CODE = RequestCode.FINISH

    def __post_init__(self):
        _check_version(self.version)
        _check_bytes("verify_data", self.verify_data, HASH_SIZE)
        _check_bytes("signature", self.signature)
        if len(self.signature) not in (0, SIGNATURE_SIZE):
            raise ValueError("signature is empty or S bytes")
        _check_int("req_slot_id", self.req_slot_id, 8)

    def header(self):
        return _header(self.version, self.CODE, int(bool(self.signature)), self.req_slot_id)

    def encode(self):
        return self.header() + bytes(self.signature) + bytes(self.verify_data)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        signature = r.take(SIGNATURE_SIZE) if p1 & 1 else b""
        verify = r.take(HASH_SIZE)
        r.end()
        return cls(version, verify, signature, p2)


@dataclasses.dataclass(frozen=True)
class FinishRsp(_HeaderOnly):
    """FINISH_RSP: header; ResponderVerifyData(H) only with HANDSHAKE_IN_THE_CLEAR, which
    the model never negotiates, so the message is the 4-byte header."""
    CODE = ResponseCode.FINISH_RSP


# --- ERROR -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ErrorResponse:
    """ERROR: Param1 = ErrorCode, Param2 = ErrorData; ExtendedErrorData (0..32 bytes)."""
    version: int
    code: int
    data: int = 0
    extended: bytes = b""
    CODE = ResponseCode.ERROR

    def __post_init__(self):
        _check_int("version", self.version, 8)
        _check_int("code", self.code, 8)
        _check_int("data", self.data, 8)
        _check_bytes("extended", self.extended, max_size=32)

    def encode(self):
        return _header(self.version, self.CODE, self.code, self.data) + bytes(self.extended)

    @classmethod
    def _decode(cls, r, version, p1, p2, **_):
        extended = r.take(len(r.data) - r.pos)
        if len(extended) > 32:
            raise TrailingBytesError(f"ExtendedErrorData of {len(extended)} bytes exceeds 32")
        try:
            code = ErrorCode(p1)
        except ValueError:
            code = p1
        return cls(version, code, p2, extended)


_REQUESTS = {c.CODE: c for c in (GetVersion, GetCapabilities, NegotiateAlgorithms, GetDigests, GetCertificate,
                                 Challenge, GetMeasurements, KeyExchange, Finish)}
_RESPONSES = {c.CODE: c for c in (Version, Capabilities, Algorithms, Digests, Certificate, ChallengeAuth,
                                  Measurements, KeyExchangeRsp, FinishRsp, ErrorResponse)}


def _decode(data, table, what, **ctx):
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"an SPDM message is bytes, not {type(data).__name__}")
    r = _Reader(bytes(data), what)
    version, code, p1, p2 = r.take(4)
    cls = table.get(code)
    if cls is None:
        raise UnknownCodeError(f"{what}: RequestResponseCode 0x{code:02x} is not one the model decodes")
    r.what = f"{cls.__name__} ({what})"
    if cls not in (GetVersion, Version, ErrorResponse) and version not in SUPPORTED_VERSIONS:
        raise InvalidFieldError(f"{cls.__name__}: no layout for SPDMVersion 0x{version:02x}")
    try:
        return cls._decode(r, version, p1, p2, **ctx)
    except (ValueError, TypeError) as e:  # a constructor refusing a decoded field
        raise InvalidFieldError(f"{cls.__name__}: {e}") from None


def decode_request(data: bytes):
    """Decode a request message (any of the nine this model implements)."""
    return _decode(data, _REQUESTS, "request")


def decode_response(data: bytes, request=None):
    """Decode a response message; *request* is the decoded request it answers (needed
    for CHALLENGE_AUTH, MEASUREMENTS and KEY_EXCHANGE_RSP, whose layout depends on it)."""
    return _decode(data, _RESPONSES, "response", request=request)
