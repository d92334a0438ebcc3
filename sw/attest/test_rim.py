"""RIM writer, parser and XML-signature check on our own hierarchy."""
import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sw.attest.errors import AttestError, RimFormatError, RimSignatureError
from sw.attest.firmware import DRIVER_SLOTS, VBIOS_SLOTS, ModelledFirmware, decode_policy, policy_value
from sw.attest.identity import RimAuthority
from sw.attest.rim import parse_rim, verify_rim_signature, write_rim
from sw.attest.testbed import AT


@pytest.fixture(scope="module")
def authority():
    return RimAuthority(b"rim-tests")


@pytest.fixture(scope="module")
def rim(authority):
    return write_rim(product="GH100", version="550.90.07", golden=ModelledFirmware().golden("driver"),
                     signer=authority.signer())


def test_round_trip(rim, authority):
    parsed = parse_rim(rim)
    assert parsed.colloquial_version == "550.90.07" and parsed.product == "GH100"
    assert sorted(parsed.active()) == list(DRIVER_SLOTS) and len(parsed.measurements) == 64
    golden = ModelledFirmware().golden("driver")
    assert all(parsed.measurements[i].alternatives == tuple(golden[i]) for i in DRIVER_SLOTS)
    chain = verify_rim_signature(rim, authority.root, at=AT)
    assert [c.subject for c in chain] == [c.subject for c in authority.signer().certificates]


def test_golden_values_are_an_extend_from_zero():
    """The RIM value is what the RTS holds after one extend (checked against hashlib here,
    while the RTS model computes it from its own code in the end-to-end tests)."""
    import hashlib
    fw = ModelledFirmware()
    slot = VBIOS_SLOTS[2]
    assert fw.golden("vbios")[slot] == [hashlib.sha384(bytes(48) + hashlib.sha384(fw.image(slot)).digest()).digest()]
    assert decode_policy(policy_value("devtools")) == ("on", True)
    assert decode_policy(bytes(48)) == ("unknown", None)


def test_wrong_root_and_expired(rim, authority):
    with pytest.raises(RimSignatureError, match="RIM signer chain"):
        verify_rim_signature(rim, RimAuthority(b"other").root, at=AT)
    with pytest.raises(RimSignatureError, match="not valid at"):
        verify_rim_signature(rim, authority.root, at=datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc))


def test_content_and_signature_edits(rim, authority):
    text = rim.decode()
    sv = text.index("<ds:SignatureValue>") + len("<ds:SignatureValue>")
    edits = {
        "value": text.replace('active="False"', 'active="True"', 1),
        "version": text.replace("550.90.07", "550.90.08", 1),
        "whitespace between elements": text.replace("\n        <Resource", "\n         <Resource", 1),
        "signature": text[:sv] + ("B" if text[sv] == "A" else "A") + text[sv + 1:],
    }
    for name, edited in edits.items():
        assert edited != text, name
        with pytest.raises(AttestError):
            verify_rim_signature(edited.encode(), authority.root, at=AT)


def test_signed_info_algorithm_checked(rim, authority):
    weak = rim.replace(b"xmldsig-more#ecdsa-sha384", b"xmldsig-more#ecdsa-sha256")
    with pytest.raises(RimFormatError, match="SignatureMethod"):
        verify_rim_signature(weak, authority.root, at=AT)


@pytest.mark.parametrize("blob", [b"", b"<a/>", b"not xml", b"<!DOCTYPE x [<!ENTITY e 'x'>]><x>&e;</x>",
                                  "<SoftwareIdentity/>", None])
def test_garbage_raises_format_error(blob, authority):
    with pytest.raises(RimFormatError):
        parse_rim(blob)
    with pytest.raises(RimFormatError):
        verify_rim_signature(blob, authority.root, at=AT)


def test_writer_rejects_bad_parameters(authority):
    signer = authority.signer()
    with pytest.raises(ValueError):
        write_rim(product="GH100", version="1", golden={64: [bytes(48)]}, signer=signer)
    with pytest.raises(ValueError):
        write_rim(product="GH100", version="1", golden={1: [bytes(47)]}, signer=signer)
    with pytest.raises(TypeError):
        write_rim(product="GH100", version="1", golden={1: [bytes(48)]}, signer=None)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_mutated_rim_bytes(rim, authority, data):
    """A changed byte: a documented error, or — only where the XML reads the same — the
    same parsed content."""
    pos = data.draw(st.integers(0, len(rim) - 1))
    mutated = bytearray(rim)
    mutated[pos] = data.draw(st.integers(0, 255).filter(lambda b: b != rim[pos]))
    try:
        verify_rim_signature(bytes(mutated), authority.root, at=AT)
    except AttestError:
        return
    assert parse_rim(bytes(mutated)) == parse_rim(rim)
