"""Property tests: the beat codec and the read-table model's ports take random and flawed
input and raise only their documented errors (sw.common.payload's PayloadError, and
PacketError for a beat the port cannot carry), leaving the model as it was.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hw.sxp.packet import beat_layout
from sw.common.payload import PayloadError
from sw.pcie.beats import HEADER_FIELDS, Beat, PacketError, check_beat, decode, encode, header
from sw.pcie.model import ModelError, RdTableModel

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
NOT_INTS = st.one_of(st.none(), st.floats(), st.text(max_size=3), st.binary(max_size=3))


@SETTINGS
@given(st.sampled_from([1, 2, 4]), st.data())
def test_decode_encode_round_trip_and_range(lanes, draw):
    size = beat_layout(lanes).size
    value = draw.draw(st.integers(0, (1 << size) - 1), label="value")
    assert encode(decode(value, lanes), lanes) == value
    bad = draw.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << size), NOT_INTS), label="bad")
    with pytest.raises(PayloadError):
        decode(bad, lanes)


@SETTINGS
@given(st.one_of(st.integers(-1, 8), NOT_INTS, st.just(True)))
def test_lanes_refused(lanes):
    if type(lanes) is int and lanes in (1, 2, 4):
        assert decode(0, lanes) == Beat(0, header(), 0, 0)
        return
    with pytest.raises(PayloadError, match="lanes"):
        decode(0, lanes)
    with pytest.raises(PayloadError, match="lanes"):
        encode(Beat(), lanes)


@st.composite
def beats(draw, lanes):
    """(flaw, beat): a beat of *lanes* with at most one flaw."""
    flaw = draw(st.sampled_from(["none"] * 6 + ["not a beat", "wide data", "junk data", "first", "missing field",
                                                 "wide field", "junk field", "hdr not a dict"]))
    if flaw == "not a beat":
        return flaw, draw(st.one_of(st.integers(), st.text(max_size=2), st.lists(st.integers(), max_size=2)))
    hdr = header(tag=draw(st.integers(0, 7)), addr=draw(st.sampled_from([0, 64, 128, 1 << 20])),
                 length=draw(st.sampled_from([64, 128, 256, 16, 0])), kind=draw(st.integers(0, 3)))
    data = draw(st.integers(0, (1 << 128 * lanes) - 1))
    first, last = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    name = draw(st.sampled_from(HEADER_FIELDS))
    if flaw == "wide data":
        data = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 128 * lanes)))
    elif flaw == "junk data":
        data = draw(NOT_INTS)
    elif flaw == "first":
        first = draw(st.one_of(st.integers(2, 9), st.just(-1), NOT_INTS))
    elif flaw == "missing field":
        del hdr[name]
    elif flaw == "wide field":
        hdr[name] = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 32)))
    elif flaw == "junk field":
        hdr[name] = draw(NOT_INTS)
    elif flaw == "hdr not a dict":
        hdr = draw(st.one_of(st.none(), st.integers()))
    return flaw, Beat(data, hdr, first, last)


@pytest.mark.parametrize("lanes", [1, 4])
@SETTINGS
@given(st.data())
def test_check_beat_refuses_exactly_the_flawed(lanes, draw):
    flaw, beat = draw.draw(beats(lanes), label="beat")
    try:
        check_beat(beat, lanes)
    except PacketError:
        assert flaw != "none", "a well-formed beat refused"
        return
    assert flaw == "none", f"a beat with flaw {flaw!r} accepted"
    assert decode(encode(beat, lanes), lanes) == beat


@pytest.mark.parametrize("lanes", [1, 4])
@SETTINGS
@given(st.data())
def test_rdtable_step_raises_only_documented_errors(lanes, draw):
    """Random completion beats (and requests) into a table with reads outstanding: a
    flawed beat is refused with PacketError and changes nothing; a request that breaks
    the table's preconditions is a ModelError; anything else is handled."""
    model = RdTableModel(entries=8, rcb=64 if lanes < 4 else 128, lanes=lanes)
    for addr in (0, 1 << 20):
        model.request(addr=addr, length=256)
    for _ in range(draw.draw(st.integers(1, 4), label="beats")):
        port = draw.draw(st.sampled_from(["cpl", "cpl", "req"]), label="port")
        flaw, beat = draw.draw(beats(lanes), label="beat")
        header_flaw = "field" in flaw or "dict" in flaw
        # the header of a completion beat after the first is ignored, flawed or not
        refuse = flaw != "none" and not (port == "cpl" and model.pkt_state != "start" and header_flaw)
        before = (model.cycle, model.status(), model.pkt_state, len(model.cpl_out), len(model.req_out))
        try:
            model.step(**{port: beat})
        except PacketError:
            assert refuse, f"a beat refused ({flaw}, {port}, {model.pkt_state})"
            after = (model.cycle, model.status(), model.pkt_state, len(model.cpl_out), len(model.req_out))
            assert after == before, "a refused beat changed the model"
            continue
        except ModelError:
            assert port == "req" and not refuse, "ModelError is for well-formed requests the table cannot take"
            return
        assert not refuse, f"a beat with flaw {flaw!r} accepted on {port}"
    with pytest.raises(PacketError):
        model.step(timeout=-1)
