"""The whole TEE lifecycle, with every expected value computed in the test: report
fields parsed by hand and its signature checked with ``cryptography`` directly, run keys
from an RFC 5869 HKDF written in the test, a key package wrapped by hand."""
import hashlib
import os
import struct

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sw.ccu import ResumePoint, ScheduleExhaustedError, SxpRegister, TeeState
from sw.ccu.certs import fingerprint
from sw.ccu.testing import (
    CODE_KEY,
    DATA,
    DATA_KEY_A,
    DATA_KEY_B,
    MODEL,
    UDS,
    WEIGHTS_KEY,
    certificates,
    leftover_secrets,
    reachable,
    reference_identity,
    rfc5869_hkdf,
)

# What the tile bootloader measures of the binary make_manifest's job loads.
LOADED_BINARY = hashlib.sha384(b"ipu binary").digest()


def run_key(nonces, job_id, epoch, label):
    ikm = b"".join(sorted(nonces))
    return rfc5869_hkdf(ikm, job_id, b"ITX-CCU " + label + struct.pack(">I", epoch), 32)


def parse_report(blob):
    """Field by field, as docs/ccu.md lays the report out."""
    body, r, s = blob[:-96], blob[-96:-48], blob[-48:]
    assert body[:8] == b"ITXR\x00\x01\x00\x00"
    out = {"job_id": body[8:24], "manifest_hash": body[24:72]}
    out["epoch"], out["checkpoint_id"], n = struct.unpack(">IIH", body[72:82])
    out["slots"] = [body[82 + 48 * i:130 + 48 * i] for i in range(n)]
    pos = 82 + 48 * n
    (k,) = struct.unpack(">H", body[pos:pos + 2])
    out["parties"] = [(int.from_bytes(body[pos + 2 + 50 * i:pos + 4 + 50 * i], "big"),
                       body[pos + 4 + 50 * i:pos + 52 + 50 * i]) for i in range(k)]
    pos += 2 + 50 * k
    assert body[pos:pos + 2] == b"\x00\x61" and len(body) == pos + 2 + 97
    out["ecdh"] = body[pos + 2:]
    out["body"], out["sig"] = body, encode_dss_signature(int.from_bytes(r, "big"),
                                                         int.from_bytes(s, "big"))
    return out


def keys_installed(port, start=0):
    return [(ctx, key) for kind, *rest in port.log[start:] if kind == "key"
            for ctx, key in [rest]]


def run_once(device, parties, manifest, identities, party_keys, nonces, resume=None,
             resume_nonces=None):
    """create → report → both parties verify and wrap → launch. Returns the evidence."""
    cce = device.cce
    cce.create_tee(manifest, certificates(identities), resume)
    evidence = cce.get_attestation_report()
    epoch = 0 if resume is None else resume.epoch + 1
    ckpt = 0 if resume is None else resume.checkpoint_id
    for pid, party in parties.items():
        verified = party.verify(evidence, epoch=epoch, checkpoint_id=ckpt)
        pkg = party.wrap_keys(verified, party_keys[pid], nonce=nonces[pid],
                              resume_nonce=None if resume_nonces is None else resume_nonces[pid])
        assert cce.submit_key_package(pkg) == pid
    return evidence


def test_full_lifecycle(device, parties, manifest, identities, party_keys, bundle):
    cce, port = device.cce, device.port
    assert cce.state is TeeState.READY
    nonces = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    evidence = run_once(device, parties, manifest, identities, party_keys, nonces)
    # create_tee wrote the whole configuration -- the manifest's four entries, every other
    # entry at its reset value (docs/registers.md) -- and only then requested trusted mode.
    regions = {1: (0x1000_0000, 0x2000_0000)}
    want = [("config", SxpRegister.KXBCTXMAP, x, 0) for x in range(16)] + \
        [("config", SxpRegister.KPHYSMAP, p, p + 1) for p in range(16)] + \
        [("config", SxpRegister.KSELLIMIT_BASE, r, regions.get(r, (0, 0))[0]) for r in range(17)] + \
        [("config", SxpRegister.KSELLIMIT_LIMIT, r, regions.get(r, (0, 0))[1]) for r in range(17)]
    assert port.log == want + [("trusted",)]
    assert cce.state is TeeState.CREATED and port.trusted

    # The report, checked without the model: chain, signature, fields.
    cik, pik, ak = (x509.load_der_x509_certificate(c) for c in evidence.certificates)
    ref = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)
    assert ak.public_key().public_numbers() == \
        ec.derive_private_key(ref["ak"], ec.SECP384R1()).public_key().public_numbers()
    rep = parse_report(evidence.report)
    ak.public_key().verify(rep["sig"], rep["body"], ec.ECDSA(hashes.SHA384()))
    assert rep["job_id"] == manifest.job_id and (rep["epoch"], rep["checkpoint_id"]) == (0, 0)
    assert rep["manifest_hash"] == hashlib.sha384(manifest.encode()).digest()
    assert rep["slots"] == list(device.measurements.values()) and len(rep["slots"]) == 64
    assert rep["parties"] == [(pid, fingerprint(identities[pid][1])) for pid in (MODEL, DATA)]
    ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), rep["ecdh"])

    info = cce.launch()
    assert cce.state is TeeState.BOOTING      # the tile bootloader loads the binary ...
    cce.start_main(LOADED_BINARY)             # ... and its measurement is the manifest's
    assert cce.state is TeeState.RUNNING
    # Once the keys are derived, the nonces and the ECDH key are gone: the AK is the only
    # private key the CCE still reaches.
    assert leftover_secrets(cce, {"nonce1": nonces[MODEL], "nonce2": nonces[DATA]}, {},
                            skip=[port]) == []
    private = [o for o in reachable(cce, skip=[port])
               if isinstance(o, ec.EllipticCurvePrivateKey)]
    assert [k.private_numbers().private_value for k in private] == [ref["ak"]]
    assert (info.tile_bootloader, info.epoch, info.checkpoint_id) == \
        (bundle.tile_bootloader, 0, 0)
    assert port.log[len(want) + 1:] == [("key", 0, party_keys[MODEL][CODE_KEY])], \
        "launch() wrote something besides key set 0 (the configuration is create_tee's)"

    mark = len(port.log)
    assert cce.next_key_set() == 1            # synchronisation point 1
    ckpt0 = run_key(nonces.values(), manifest.job_id, 0, b"checkpoint")
    final0 = run_key(nonces.values(), manifest.job_id, 0, b"final-model")
    assert keys_installed(port, mark) == [(1, party_keys[MODEL][WEIGHTS_KEY]),
                                          (2, party_keys[DATA][DATA_KEY_A]),
                                          (3, ckpt0), (5, final0)]   # fresh run: no ctx 4
    mark = len(port.log)
    assert cce.next_key_set() == 2            # synchronisation point 2: data key change
    assert keys_installed(port, mark) == [(2, party_keys[DATA][DATA_KEY_B])]
    with pytest.raises(ScheduleExhaustedError):
        cce.next_key_set()

    mark = len(port.log)
    cce.terminate()
    assert cce.state is TeeState.TERMINATED
    assert keys_installed(port, mark) == [(c, bytes(32)) for c in range(6) if c != 4]
    secrets = {f"key{k}": v for d in party_keys.values() for k, v in d.items()}
    secrets |= {"nonce1": nonces[MODEL], "nonce2": nonces[DATA], "ckpt": ckpt0,
                "final": final0}
    assert leftover_secrets(cce, secrets, {"ak": ref["ak"]}, skip=[port]) == []

    # Resume from checkpoint 7 of epoch 0 on the same device after a reset: the previous
    # checkpoint key comes back only because both parties give their old nonces.
    device.reset()
    new = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    evidence = run_once(device, parties, manifest, identities, party_keys, new,
                        ResumePoint(epoch=0, checkpoint_id=7), resume_nonces=nonces)
    rep = parse_report(evidence.report)
    assert (rep["epoch"], rep["checkpoint_id"]) == (1, 7)
    device.cce.launch()
    device.cce.start_main(LOADED_BINARY)
    mark = len(device.port.log)
    device.cce.next_key_set()
    got = dict(keys_installed(device.port, mark))
    assert got[4] == ckpt0                                   # resumed run's key, recomputed
    assert got[3] == run_key(new.values(), manifest.job_id, 1, b"checkpoint") != ckpt0
    assert got[5] == run_key(new.values(), manifest.job_id, 1, b"final-model")
    device.cce.terminate()


def test_resume_with_a_changed_nonce_gets_another_key(device, parties, manifest, identities,
                                                       party_keys):
    old = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    ckpt0 = run_key(old.values(), manifest.job_id, 0, b"checkpoint")
    liar = {MODEL: old[MODEL], DATA: os.urandom(32)}     # one party does not agree
    run_once(device, parties, manifest, identities, party_keys,
             {MODEL: os.urandom(32), DATA: os.urandom(32)},
             ResumePoint(epoch=0, checkpoint_id=3), resume_nonces=liar)
    device.cce.launch()
    device.cce.start_main(LOADED_BINARY)
    mark = len(device.port.log)
    device.cce.next_key_set()
    got = dict(keys_installed(device.port, mark))
    assert got[4] == run_key(liar.values(), manifest.job_id, 0, b"checkpoint") != ckpt0


def test_hand_wrapped_package_is_accepted(created, parties, identities, manifest):
    """A package built from the documented format alone (no model code)."""
    evidence = created.cce.get_attestation_report()
    verified = parties[MODEL].verify(evidence)        # only to read the report's fields
    rep = parse_report(evidence.report)
    report_hash = hashlib.sha384(rep["body"]).digest()
    ccu_pub = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), rep["ecdh"])
    assert verified.report_hash == report_hash
    z = identities[MODEL][0].exchange(ec.ECDH(), ccu_pub)
    kw = rfc5869_hkdf(z, report_hash, b"ITX-CCU key package v1" + manifest.job_id +
                      struct.pack(">H", MODEL), 32)
    iv, code, weights, nonce = os.urandom(12), os.urandom(32), os.urandom(32), os.urandom(32)
    header = b"ITXK\x01\x00" + struct.pack(">H", MODEL) + manifest.job_id + report_hash + \
        struct.pack(">Q", 5) + iv
    pt = manifest.job_id + struct.pack(">HQ", MODEL, 5) + nonce + b"\x00" + \
        struct.pack(">H", 2) + struct.pack(">H", CODE_KEY) + code + \
        struct.pack(">H", WEIGHTS_KEY) + weights
    assert created.cce.submit_key_package(header + AESGCM(kw).encrypt(iv, pt, header)) == MODEL
    other = parties[DATA]
    created.cce.submit_key_package(other.wrap_keys(other.verify(evidence),
                                                    {DATA_KEY_A: bytes(32),
                                                     DATA_KEY_B: bytes(32)}))
    created.cce.launch()
    assert created.port.keys[0] == code


def test_later_package_supersedes(created, parties, party_keys):
    cce = created.cce
    v = parties[MODEL].verify(cce.get_attestation_report())
    cce.submit_key_package(parties[MODEL].wrap_keys(v, {CODE_KEY: bytes(32),
                                                        WEIGHTS_KEY: bytes(32)}))
    cce.submit_key_package(parties[MODEL].wrap_keys(v, party_keys[MODEL]))
    vd = parties[DATA].verify(cce.get_attestation_report())
    cce.submit_key_package(parties[DATA].wrap_keys(vd, party_keys[DATA]))
    cce.launch()
    assert created.port.keys[0] == party_keys[MODEL][CODE_KEY]
