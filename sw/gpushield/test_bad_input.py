"""Property tests: the GPUShield model's public inputs — the id cipher, pointer decoders and
the BCU's warp requests — take random and flawed values and raise only BcuInputError (a
ValueError; with TypeError for non-integers), before the BCU changes state.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import copy
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hw.gpushield.layout import ID_BITS, KEY_BITS, PtrType
from sw.gpushield.driver import SparseMemory
from sw.gpushield.model import (
    BcuInputError,
    BCUModel,
    WarpRequest,
    decrypt_id,
    encrypt_id,
    pointer_addr,
    pointer_eid,
    pointer_kind,
    t1_pointer,
)

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
NOT_INTS = st.one_of(st.none(), st.floats(), st.text(max_size=3), st.binary(max_size=3))


def value(bits, good=None):
    """(ok, value): an int of *bits* bits, or a flawed value."""
    good = st.integers(0, (1 << bits) - 1) if good is None else good
    return st.one_of(good.map(lambda v: (True, v)),
                     st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << bits), NOT_INTS)
                     .map(lambda v: (False, v)))


@SETTINGS
@given(value(ID_BITS), value(KEY_BITS))
def test_id_cipher_refuses_exactly_the_flawed(buffer_id, key):
    (id_ok, i), (key_ok, k) = buffer_id, key
    try:
        enc = encrypt_id(i, k)
    except BcuInputError:
        assert not (id_ok and key_ok)
        with pytest.raises(BcuInputError):
            decrypt_id(i, k)
        return
    assert id_ok and key_ok and decrypt_id(enc, k) == i


@SETTINGS
@given(value(64))
def test_pointer_decoders_refuse_exactly_the_flawed(pointer):
    ok, p = pointer
    for decode in (pointer_kind, pointer_addr, pointer_eid):
        try:
            decode(p)
        except BcuInputError:
            assert not ok
            continue
        assert ok


def _snapshot(model):
    """A deep copy of the BCU's state (everything but the memory-read callback)."""
    return copy.deepcopy({k: v for k, v in vars(model).items() if not callable(v)})


def _model():
    return BCUModel(SparseMemory().read128, lanes=4)


@SETTINGS
@given(st.data())
def test_bcu_check_refuses_exactly_the_flawed(draw):
    """A WarpRequest with one field that does not fit is refused with BcuInputError and
    leaves the BCU's counters and caches as they were; a good one is answered."""
    model = _model()
    model.launch()
    good = WarpRequest(t1_pointer(0x1000), [t1_pointer(0x1000 + 4 * k) for k in range(4)], 0b1111)
    name = draw.draw(st.sampled_from(["base", "lane", "mask", "size_log2", "store", "tag", "slot", "lanes", "type"]))
    widths = {"base": 64, "lane": 64, "mask": 4, "size_log2": 2, "store": 1, "tag": 16, "slot": 2}
    slot, req, ok = 0, good, True
    if name in widths:
        ok, v = draw.draw(value(widths[name]), label=name)
        if name == "slot":
            slot = v                    # any 2-bit slot is a legal input (an absent one is cause 3)
        elif name == "lane":
            req = dataclasses.replace(good, addrs=[v] + good.addrs[1:])
        else:
            req = dataclasses.replace(good, **{name: v})
    elif name == "lanes":
        req, ok = dataclasses.replace(good, addrs=good.addrs[:3]), False
    else:
        req, ok = draw.draw(st.one_of(st.none(), st.integers(), st.just(good.addrs))), False
    before = _snapshot(model)
    try:
        result = model.check(req, slot)
    except BcuInputError:
        assert not ok, f"a good request refused ({name})"
        assert _snapshot(model) == before, "a refused request changed the BCU"
        return
    assert ok, f"a request with a flawed {name} accepted"
    assert result is not None


def test_pointer_type_field_is_decoded():
    assert pointer_kind(t1_pointer(0x40)) is PtrType.T1
