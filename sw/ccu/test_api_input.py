"""Property tests: the CCU's host API and its manifest take values of the wrong type or
shape — a manifest that is not a JobManifest or whose fields are junk, party certificates
that are neither DER bytes nor certificates, a resume point that is not one, a measurement
slot that does not exist — and raise only the error the module documents
(:class:`ManifestError`, :class:`PartyCertificateError`, :class:`SlotOwnerError`), never an
AttributeError, TypeError or IndexError from inside, and change nothing: the port saw no
call, the slots are as they were, and the same CCE then creates the TEE from good input.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sw.ccu.cce import ResumePoint, TeeState
from sw.ccu.errors import CcuError, ManifestError, PartyCertificateError, SlotOwnerError
from sw.ccu.manifest import ConfigWrite, JobManifest
from sw.ccu.measure import DIGEST_SIZE, SLOTS, MeasurementStore
from sw.ccu.testing import certificates, make_device

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
JUNK = st.one_of(st.none(), st.integers(-2, 70_000), st.booleans(), st.floats(allow_nan=False),
                 st.text(max_size=17), st.binary(max_size=49), st.lists(st.integers(0, 255), max_size=3),
                 st.tuples(), st.just(object()))


def assert_unchanged(device, slots):
    """The refused call left the CCE in READY, touched no port register and extended no slot."""
    assert device.cce.state is TeeState.READY
    assert device.port.log == [], device.port.log
    assert device.measurements.values() == slots


def assert_carries_on(device, manifest, identities):
    device.cce.create_tee(manifest, certificates(identities))
    assert device.cce.state is TeeState.CREATED


# ---- create_tee ----------------------------------------------------------------------------
def test_audit_cases_create_tee(device, manifest, identities):
    """The probe's inputs: a party certificate that is None, an int or a str leaked
    AttributeError ('fingerprint'), party_certificates=None a TypeError, a manifest that is
    None or a string an AttributeError."""
    slots = device.measurements.values()
    good = certificates(identities)
    for bad in (None, 12, "xx"):
        with pytest.raises(PartyCertificateError, match=f"is a {type(bad).__name__}, neither DER bytes"):
            device.cce.create_tee(manifest, [good[0], bad])
    for bad in (None, 5, good[0], "certs"):
        with pytest.raises(PartyCertificateError, match="party_certificates is a"):
            device.cce.create_tee(manifest, bad)
    for bad in (None, "manifest", manifest.encode()):
        with pytest.raises(ManifestError, match=f"is a {type(bad).__name__}, not a JobManifest"):
            device.cce.create_tee(bad, good)
    for bad in (5, (1, 2), ResumePoint("1", 0), ResumePoint(0, None)):
        with pytest.raises(ManifestError, match="resume point"):
            device.cce.create_tee(manifest, good, bad)
    assert_unchanged(device, slots)
    assert_carries_on(device, manifest, identities)


@st.composite
def flawed_certificates(draw, good):
    """The parties' certificates with one flaw: an entry replaced by junk, or the whole
    argument replaced by junk."""
    if draw(st.booleans(), label="whole"):
        return draw(JUNK, label="party_certificates")
    certs = list(good)
    certs[draw(st.integers(0, len(certs) - 1), label="which")] = draw(JUNK, label="entry")
    return certs


@SETTINGS
@given(draw=st.data())
def test_create_tee_party_certificates_raise_only_party_certificate_error(ca, bundle, manifest, identities, draw):
    device = make_device(ca, bundle)               # a fresh one per example: it ends CREATED
    slots = device.measurements.values()
    bad = draw.draw(flawed_certificates(certificates(identities)))
    with pytest.raises(CcuError) as info:
        device.cce.create_tee(manifest, bad)
    assert isinstance(info.value, PartyCertificateError), repr(info.value)
    assert_unchanged(device, slots)
    assert_carries_on(device, manifest, identities)


# ---- the manifest ---------------------------------------------------------------------------
def _replace(draw, manifest):
    """(path, manifest with the value at *path* replaced by junk): a top-level field, a party
    entry or one of its fields or key ids, a key set, a key install or one of its fields, a
    configuration entry or one of its fields."""
    junk = draw(JUNK, label="junk")
    field = draw(st.sampled_from(["job_id", "binary_measurement", "parties", "key_sets", "sxp_config"]),
                 label="field")
    value = getattr(manifest, field)
    depth = 0 if field in ("job_id", "binary_measurement") else draw(st.integers(0, 3), label="depth")
    if depth == 0:
        return field, dataclasses.replace(manifest, **{field: junk})
    outer = list(value)
    i = draw(st.integers(0, len(outer) - 1), label="i")
    path = f"{field}[{i}]"
    if depth == 1:
        outer[i] = junk
    elif field == "key_sets":                   # a key install, then one of its fields
        inner = list(outer[i])
        j = draw(st.integers(0, len(inner) - 1), label="j")
        path += f"[{j}]"
        if depth == 2:
            inner[j] = junk
        else:
            name = draw(st.sampled_from(["phys_ctx", "key_id"]), label="name")
            path += f".{name}"
            inner[j] = dataclasses.replace(inner[j], **{name: junk})
        outer[i] = tuple(inner)
    else:                                       # a field of a party entry / config write
        names = ["party_id", "fingerprint", "key_ids"] if field == "parties" else ["register", "index", "value"]
        name = draw(st.sampled_from(names), label="name")
        path += f".{name}"
        if depth == 3 and name == "key_ids":     # one key id of the party
            ids = list(outer[i].key_ids)
            ids[draw(st.integers(0, len(ids) - 1), label="k")] = junk
            junk = tuple(ids)
        outer[i] = dataclasses.replace(outer[i], **{name: junk})
    return path, dataclasses.replace(manifest, **{field: tuple(outer)})


def test_audit_cases_manifest(manifest):
    """A str job id (16 characters) passed the length check and leaked TypeError from the
    encoding's bytes join; likewise a str measurement, fingerprint, or junk in the lists."""
    for field, bad in (("job_id", "job-0001-abcdefg"), ("binary_measurement", "m" * 48),
                       ("job_id", bytearray(16)), ("parties", None), ("key_sets", 7), ("sxp_config", None)):
        with pytest.raises(ManifestError, match=field.replace("_", ".")):
            dataclasses.replace(manifest, **{field: bad}).validate()
    party = dataclasses.replace(manifest.parties[0], fingerprint="f" * 48)
    with pytest.raises(ManifestError, match="fingerprint"):
        dataclasses.replace(manifest, parties=(party,) + manifest.parties[1:]).hash()
    with pytest.raises(ManifestError, match="not a ConfigWrite"):
        dataclasses.replace(manifest, sxp_config=manifest.sxp_config + ((1, 0, 0),)).validate()
    assert ConfigWrite(1, 0, 0) != (1, 0, 0)


@SETTINGS
@given(draw=st.data())
def test_manifest_with_junk_raises_only_manifest_error(manifest, draw):
    """validate (and so encode, hash, configuration) raises ManifestError or accepts, and a
    manifest it accepts encodes: the junk happened to be a value of the right type."""
    path, flawed = _replace(draw.draw, manifest)
    try:
        flawed.validate()
    except ManifestError:
        return
    assert len(flawed.hash()) == 48 and flawed.config_writes(), path


@SETTINGS
@given(draw=st.data())
def test_create_tee_with_junk_manifest_changes_nothing(device, manifest, identities, draw):
    slots = device.measurements.values()
    path, flawed = _replace(draw.draw, manifest)
    try:
        flawed.validate()
    except ManifestError:
        pass
    else:
        return                                  # a valid manifest: not this test's business
    with pytest.raises(CcuError) as info:
        device.cce.create_tee(flawed, certificates(identities))
    assert isinstance(info.value, ManifestError), (path, repr(info.value))
    assert_unchanged(device, slots)


@SETTINGS
@given(st.one_of(JUNK, st.builds(ResumePoint, JUNK, JUNK), st.builds(ResumePoint, st.integers(), st.integers())))
def test_create_tee_resume_point_raises_only_manifest_error(ca, bundle, manifest, identities, resume):
    """A resume point that is not a ResumePoint of two u32 values (the epoch below the
    last): ManifestError, nothing changed."""
    ok = (isinstance(resume, ResumePoint) and all(type(v) is int for v in (resume.epoch, resume.checkpoint_id))
          and 0 <= resume.epoch < 0xFFFFFFFF and 0 <= resume.checkpoint_id <= 0xFFFFFFFF) or resume is None
    device = make_device(ca, bundle)               # a fresh one per example: it may end CREATED
    slots = device.measurements.values()
    try:
        device.cce.create_tee(manifest, certificates(identities), resume)
    except CcuError as e:
        assert not ok and isinstance(e, ManifestError), repr(e)
        assert_unchanged(device, slots)
        return
    assert ok and device.cce.state is TeeState.CREATED


def test_a_job_manifest_is_required(device, manifest, identities):
    """Not a JobManifest but one's encoding, a dict of its fields, or a look-alike: refused."""
    lookalike = type("Lookalike", (), {"validate": lambda self: None})()
    for bad in (manifest.encode(), dataclasses.asdict(manifest), lookalike):
        with pytest.raises(ManifestError, match="not a JobManifest"):
            device.cce.create_tee(bad, certificates(identities))
    assert isinstance(manifest, JobManifest)


# ---- measurement slots -----------------------------------------------------------------------
def test_audit_cases_read():
    """read(-1) returned slot 63, read(64) raised IndexError."""
    store = MeasurementStore()
    store.extend("cce", 63, bytes(DIGEST_SIZE))
    for bad in (-1, 64, -64):
        with pytest.raises(SlotOwnerError, match=f"no measurement slot {bad}"):
            store.read(bad)


@settings(SETTINGS, max_examples=80)
@given(st.one_of(st.integers(-3 * SLOTS, 3 * SLOTS), JUNK))
def test_slot_numbers_raise_only_slot_owner_error(slot):
    """read, owner and extend (by the slot's owner, per the layout in sw/ccu/measure.py) on
    any slot: a slot 0..63 works; anything else (out of range, not an int, a bool) raises
    SlotOwnerError and extends nothing."""
    store = MeasurementStore()
    valid = type(slot) is int and 0 <= slot < SLOTS
    owner = {0: "pbl", 1: "sbl", 2: "sbl"}.get(slot, "cce") if valid else "cce"
    for call in (store.read, store.owner, lambda s: store.extend(owner, s, bytes(DIGEST_SIZE))):
        try:
            got = call(slot)
        except SlotOwnerError:
            assert not valid, f"slot {slot} refused"
            continue
        assert valid, f"slot {slot!r} accepted"
        assert got == owner or len(got) == DIGEST_SIZE
    assert valid or store.values() == (bytes(DIGEST_SIZE),) * SLOTS
