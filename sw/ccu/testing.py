"""Test support for the CCU model (used by conftest.py, the tests and the benchmark):
fixed UDS, firmware bundles, a provisioned device, two parties and their manifest."""
import hashlib
import hmac as _hmac
import os
import types as _types

from cryptography.hazmat.primitives.asymmetric import ec

from .ca import ManufacturerCA
from .certs import fingerprint
from .device import Device
from .manifest import (
    KEY_CHECKPOINT,
    KEY_FINAL_MODEL,
    KEY_RESUME_CHECKPOINT,
    ConfigWrite,
    JobManifest,
    KeyInstall,
    PartyEntry,
)
from .party import RelyingParty, make_party_identity
from .sxp_port import RecordingSxpPort, SxpRegister

__all__ = ["UDS", "MODEL", "DATA", "CODE_KEY", "WEIGHTS_KEY", "DATA_KEY_A", "DATA_KEY_B",
           "firmware", "make_device", "make_identities", "make_manifest", "make_parties",
           "make_party_keys", "certificates", "ManufacturerCA", "rfc5869_hkdf",
           "reference_identity", "reachable", "leftover_secrets", "P384_N"]

UDS = bytes(range(48))
MODEL, DATA = 1, 2                       # party ids
CODE_KEY, WEIGHTS_KEY, DATA_KEY_A, DATA_KEY_B = 10, 11, 20, 21


def firmware(ca, sbl=b"secondary bootloader v1", cce=b"cce v1", icu=b"icu firmware v3",
             tile_bootloader=b"tile bootloader v2"):
    return ca.bundle(sbl, cce, icu, tile_bootloader)


def make_device(ca, bundle, uds=UDS, provision=True):
    """A device whose TRNG yields ``uds``; provisioned by ``ca`` unless told otherwise."""
    dev = Device(bundle, ca.firmware_public_key, RecordingSxpPort(), trng=lambda n: uds[:n])
    if provision:
        ca.provision(dev)
    return dev


def make_identities(*party_ids):
    return {pid: make_party_identity(f"party {pid}") for pid in party_ids or (MODEL, DATA)}


def make_manifest(identities, job_id=b"job-0001-abcdefg"):
    """Two parties; key set 0 = code key, set 1 = weights, data A and the derived keys,
    set 2 = data B (a synchronisation point)."""
    fp = {pid: fingerprint(cert) for pid, (_, cert) in identities.items()}
    return JobManifest(
        job_id=job_id, binary_measurement=hashlib.sha384(b"ipu binary").digest(),
        parties=(PartyEntry(MODEL, fp[MODEL], (CODE_KEY, WEIGHTS_KEY)),
                 PartyEntry(DATA, fp[DATA], (DATA_KEY_A, DATA_KEY_B))),
        key_sets=((KeyInstall(0, CODE_KEY),),
                  (KeyInstall(1, WEIGHTS_KEY), KeyInstall(2, DATA_KEY_A),
                   KeyInstall(3, KEY_CHECKPOINT), KeyInstall(4, KEY_RESUME_CHECKPOINT),
                   KeyInstall(5, KEY_FINAL_MODEL)),
                  (KeyInstall(2, DATA_KEY_B),)),
        sxp_config=(ConfigWrite(SxpRegister.KXBCTXMAP, 0, 0),
                    ConfigWrite(SxpRegister.KPHYSMAP, 0, 1),
                    ConfigWrite(SxpRegister.KSELLIMIT_BASE, 1, 0x1000_0000),
                    ConfigWrite(SxpRegister.KSELLIMIT_LIMIT, 1, 0x2000_0000)))


def make_parties(ca, reference, identities, manifest):
    return {pid: RelyingParty(pid, key, cert, ca.certificate, reference, manifest)
            for pid, (key, cert) in identities.items()}


def make_party_keys():
    """Fresh stream keys for each party."""
    return {MODEL: {CODE_KEY: os.urandom(32), WEIGHTS_KEY: os.urandom(32)},
            DATA: {DATA_KEY_A: os.urandom(32), DATA_KEY_B: os.urandom(32)}}


def certificates(identities):
    return [cert for _, cert in identities.values()]


# --- independent references (standard library only, not the model's code paths) ----------


P384_N = int("ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf"
             "581a0db248b0a77aecec196accc52973", 16)


def rfc5869_hkdf(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA384 straight from RFC 5869 with hmac/hashlib."""
    prk = _hmac.new(salt or bytes(48), ikm, hashlib.sha384).digest()
    okm, t, i = b"", b"", 1
    while len(okm) < length:
        t = _hmac.new(prk, t + info + bytes([i]), hashlib.sha384).digest()
        okm, i = okm + t, i + 1
    return okm[:length]


def reference_identity(uds: bytes, sbl_code: bytes, cce_code: bytes) -> dict:
    """HDI, CDI and the CIK/PIK/AK private scalars as docs/ccu.md specifies them."""
    m_sbl, m_cce = hashlib.sha384(sbl_code).digest(), hashlib.sha384(cce_code).digest()
    hdi = rfc5869_hkdf(uds, bytes(48), b"ITX-CCU HDI", 48)
    cdi = rfc5869_hkdf(uds, m_sbl, b"ITX-CCU CDI", 48)

    def scalar(secret, salt, label):
        return int.from_bytes(rfc5869_hkdf(secret, salt, label, 64), "big") % (P384_N - 1) + 1
    return {"hdi": hdi, "cdi": cdi,
            "cik": scalar(hdi, bytes(48), b"ITX-CCU CIK"),
            "pik": scalar(cdi, bytes(48), b"ITX-CCU PIK"),
            "ak": scalar(cdi, m_cce, b"ITX-CCU AK")}


_NOT_ENTERED = (type, _types.FunctionType, _types.MethodType, _types.BuiltinFunctionType,
                _types.ModuleType)


def reachable(root, skip=()):
    """Every object reachable from ``root`` through instance attributes (``__dict__`` and
    ``__slots__``) and containers. Functions (e.g. the TRNG) and classes are not entered;
    objects in ``skip`` (by identity) are not visited at all."""
    seen, stack, skip_ids = set(), [root], {id(s) for s in skip}
    while stack:
        obj = stack.pop()
        if id(obj) in seen or id(obj) in skip_ids or isinstance(obj, _NOT_ENTERED):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, dict):
            stack += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack += list(obj)
        elif not isinstance(obj, (str, bytes, bytearray, int, float, bool, type(None))):
            if hasattr(obj, "__dict__"):
                stack += list(vars(obj).values())
            for name in getattr(type(obj), "__slots__", ()):
                if hasattr(obj, name):
                    stack.append(getattr(obj, name))


def leftover_secrets(root, secrets: dict, scalars: dict, skip=()) -> list[str]:
    """Names of the ``secrets`` (bytes, found as substrings of any reachable bytes) and
    ``scalars`` (EC private values, found in any reachable private key) still reachable."""
    found = set()
    for obj in reachable(root, skip):
        if isinstance(obj, (bytes, bytearray)):
            found |= {n for n, s in secrets.items() if s in obj}
        elif isinstance(obj, ec.EllipticCurvePrivateKey):
            d = obj.private_numbers().private_value
            found |= {n for n, s in scalars.items() if s == d}
    return sorted(found)
