"""Property tests of the payload codec over every layout the RTL defines: unpack agrees
with Amaranth's own ``data.Const``, pack and unpack are inverse, and every malformed value
raises the codec's documented errors (:class:`~sw.common.payload.PayloadError` and its
TypeError/KeyError subclasses), never a bare ValueError, TypeError or KeyError.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import enum as py_enum
import re
from fractions import Fraction

import pytest
from amaranth.lib import data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hw.aes import layout as aes_layout
from hw.cc import dma as cc_dma
from hw.cc import layout as cc_layout
from hw.gcm import core as gcm_core
from hw.gcm import layout as gcm_layout
from hw.gpushield import checker as gs_checker
from hw.gpushield import engine as gs_engine
from hw.gpushield import layout as gs_layout
from hw.pcie import layout as pcie_layout
from hw.sxp import ingress as sxp_ingress
from hw.sxp import packet as sxp_packet
from sw.common.packet import HEADER_FIELDS, header
from sw.common.payload import PayloadError, PayloadTypeError, UnknownFieldError, pack, unpack

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
# per layout: few examples each (~500 over the ~90 layouts), so the suite stays fast
PER_LAYOUT = settings(SETTINGS, max_examples=6)

_MODULES = (aes_layout, cc_dma, cc_layout, gcm_core, gcm_layout, gs_checker, gs_engine, gs_layout,
            pcie_layout, sxp_ingress, sxp_packet)


def _layouts():
    """Every module-level layout of the RTL modules above, and every layout factory called
    at the parameters the designs use."""
    found = {}
    for mod in _MODULES:
        for name, value in vars(mod).items():
            if isinstance(value, data.Layout):
                found[f"{mod.__name__}.{name}"] = value
    for lanes in (1, 2, 4):
        found[f"sxp beat x{lanes}"] = sxp_packet.beat_layout(lanes)
        found[f"sxp op x{lanes}"] = sxp_ingress.op_layout(lanes)
        found[f"aes in x{lanes}"] = aes_layout.input_layout(lanes=lanes)
        found[f"aes out+meta x{lanes}"] = aes_layout.output_layout(meta=gcm_core.meta_layout(lanes), lanes=lanes)
        found[f"gcm in x{lanes}"] = gcm_layout.input_layout(lanes)
        found[f"gcm out x{lanes}"] = gcm_layout.output_layout(lanes)
        found[f"gcm meta x{lanes}"] = gcm_core.meta_layout(lanes)
        found[f"gcm operand x{lanes}"] = gcm_core._operand_layout(lanes)
        found[f"pcie dynamic x{lanes}"] = pcie_layout.dynamic_layout(
            pcie_layout.check_params(rcb=64 if lanes < 4 else 128, lanes=lanes))
    found["gcm key"] = gcm_layout.key_layout()
    found["pcie static"] = pcie_layout.static_layout()
    for lanes in (1, 4, 32):
        for factory in (gs_layout.req_layout, gs_layout.log_layout, gs_layout.span_layout,
                        gs_layout.uop_layout, gs_layout.check_layout, gs_checker.answer_layout):
            found[f"gpushield {factory.__name__} x{lanes}"] = factory(lanes)
    for slot_bits in (0, 2):
        found[f"gpushield fetch {slot_bits}"] = gs_engine.fetch_layout(slot_bits)
    for addr_bits in (32, 48):
        for factory in (cc_layout.desc_layout, cc_layout.rd_req_layout, cc_layout.wr_layout,
                        cc_layout.mem_req_layout, cc_dma.checked_layout):
            found[f"cc {factory.__name__} {addr_bits}"] = factory(addr_bits)
    found["cc resp_stage 4"] = cc_dma.resp_stage_layout(4)
    return found


LAYOUTS = _layouts()
IDS = sorted(LAYOUTS)
NOT_INTEGERS = st.one_of(st.floats(allow_nan=True), st.text(max_size=4), st.binary(max_size=4), st.none(),
                         st.fractions().filter(lambda f: f.denominator != 1), st.just([1]))


def _reference(layout, value, name):
    """Field *name* of payload *value* as Amaranth's ``data.Const`` reads it, as an int
    (None for an enum-shaped field holding no member: Amaranth refuses to read it)."""
    try:
        got = data.Const(layout, value)[name]
    except ValueError:
        return None
    if isinstance(got, data.Const):
        return got.as_value().value
    if isinstance(got, py_enum.Enum):
        return got.value
    return got


def test_every_layout_is_found():
    # the registry reaches every RTL family (a module dropped from _MODULES would shrink it)
    assert len(LAYOUTS) > 60
    assert {"hw.sxp.packet.Header", "hw.gpushield.layout.pointer_layout", "hw.cc.layout.iv_layout"} <= set(LAYOUTS)


@pytest.mark.parametrize("name", IDS)
@PER_LAYOUT
@given(st.data())
def test_unpack_agrees_with_amaranth_and_round_trips(name, draw):
    layout = LAYOUTS[name]
    value = draw.draw(st.integers(0, (1 << layout.size) - 1), label="value")
    flat = unpack(layout, value, enums=False)
    for field, _ in layout:
        want = _reference(layout, value, field)
        if want is not None:
            assert flat[field] == want, f"{name}.{field}"
    assert pack(layout, flat) == value       # (a union's members are views of the same bits)
    assert pack(layout, unpack(layout, value, nested=True)) == value
    assert pack(layout, unpack(layout, value, nested=True, enums=False)) == value


@pytest.mark.parametrize("name", IDS)
@PER_LAYOUT
@given(st.data())
def test_unpack_refuses_what_is_not_a_payload(name, draw):
    layout = LAYOUTS[name]
    bad = draw.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << layout.size)), label="bad")
    with pytest.raises(PayloadError, match="does not fit"):
        unpack(layout, bad)
    junk = draw.draw(NOT_INTEGERS, label="junk")
    with pytest.raises(PayloadTypeError, match="not an integer"):
        unpack(layout, junk)


@pytest.mark.parametrize("name", IDS)
@PER_LAYOUT
@given(st.data())
def test_pack_refuses_bad_field_values(name, draw):
    layout = LAYOUTS[name]
    fields = [(n, f) for n, f in layout]
    field, f = draw.draw(st.sampled_from(fields), label="field")
    big = draw.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << f.width)), label="big")
    path = re.escape(f"[{field}]" if isinstance(field, int) else field)
    with pytest.raises(PayloadError, match=f"field {path} = .* does not fit in {f.width} bits"):
        pack(layout, {field: big})
    junk = draw.draw(NOT_INTEGERS.filter(lambda v: not isinstance(v, list)), label="junk")
    with pytest.raises(PayloadTypeError):
        pack(layout, {field: junk})
    with pytest.raises(UnknownFieldError, match="no field"):
        pack(layout, {len(fields): 0} if isinstance(layout, data.ArrayLayout) else {"no such field": 0})


def test_audit_cases():
    """The values the audit found accepted: a float and a string length, a negative and an
    over-wide payload integer."""
    for length in (2.7, "5", Fraction(5, 1) + Fraction(1, 2), None):
        with pytest.raises(PayloadTypeError, match="field length"):
            pack(sxp_packet.Header, length=length)
    for value in (-1, 1 << sxp_packet.Header.size):
        with pytest.raises(PayloadError, match="does not fit"):
            unpack(sxp_packet.Header, value)
    # the error classes keep the built-in families callers catch
    assert issubclass(PayloadTypeError, TypeError) and issubclass(UnknownFieldError, KeyError)
    assert issubclass(PayloadTypeError, ValueError) and issubclass(UnknownFieldError, ValueError)
    with pytest.raises(UnknownFieldError) as info:
        pack(sxp_packet.Header, colour=1)
    assert str(info.value).startswith("no field colour"), "the message, not a quoted repr"
    # integers by __index__ still pass: bools and enum members
    assert pack(sxp_packet.Header, aes=True, kind=sxp_packet.Kind.READ_CPL) == pack(sxp_packet.Header, aes=1, kind=2)


@SETTINGS
@given(st.dictionaries(st.sampled_from(HEADER_FIELDS + ("bogus",)),
                       st.one_of(st.integers(-4, 1 << 40), NOT_INTEGERS), max_size=4))
def test_header_raises_only_payload_errors(fields):
    try:
        hdr = header(**fields)
    except PayloadError:
        return
    assert list(hdr) == list(HEADER_FIELDS)
    assert unpack(sxp_packet.Header, pack(sxp_packet.Header, hdr), enums=False) == hdr


@SETTINGS
@given(st.integers(0, 3))
def test_header_kind_enum_refuses_no_kind(kind):
    if kind in {k.value for k in sxp_packet.Kind}:
        assert header(kind_enum=True, kind=kind)["kind"].value == kind
    else:
        with pytest.raises(PayloadError, match="names no packet kind"):
            header(kind_enum=True, kind=kind)
