"""Property tests: the GCM model's port inputs (key install, input beats) and J0 builder
take random and flawed values and raise only GcmInputError (a ValueError; with TypeError
for non-integers), before any context changes.

Hypothesis runs are small and derandomized, so the suite stays fast and CI reproducible.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sw.gcm.model import GcmCoreModel, GcmInputError, GcmInputTypeError, Op, j0_block

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
NOT_INTS = st.one_of(st.none(), st.floats(), st.text(max_size=3), st.binary(max_size=3))


def value(bits, good):
    """(ok, value): an int of *bits* bits drawn from *good*, or a flawed value."""
    return st.one_of(good.map(lambda v: (True, v)),
                     st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << bits), NOT_INTS)
                     .map(lambda v: (False, v)))


def _state(model):
    return [vars(model.context(c)) for c in range(model.contexts)]


@pytest.mark.parametrize("lanes", [1, 4])
@SETTINGS
@given(st.data())
def test_step_refuses_exactly_the_flawed_inputs(lanes, draw):
    model = GcmCoreModel(contexts=4, lanes=lanes)
    model.install_key(1, 0x1234)
    j0 = j0_block(bytes(12))
    model.step(j0, 1, Op.IV, 0)
    args = {"block": draw.draw(value(128 * lanes, st.sampled_from([0, j0, (1 << 128 * lanes) - 1])), label="block"),
            "ctx": draw.draw(value(4, st.integers(0, 15)), label="ctx"),
            "op": draw.draw(st.one_of(value(2, st.sampled_from(list(Op))), value(2, st.integers(0, 3))), label="op"),
            "decrypt": draw.draw(value(1, st.sampled_from([0, 1, True, False])), label="decrypt")}
    ok = all(good for good, _ in args.values())
    before = _state(model)
    try:
        out = model.step(**{name: v for name, (_, v) in args.items()})
    except GcmInputError as e:
        assert not ok, f"good inputs refused: {e}"
        assert _state(model) == before, "a refused input changed a context"
        return
    assert ok, f"flawed inputs accepted: {args}"
    block, tag_ok, err = out
    assert 0 <= block < 1 << 128 * lanes and tag_ok in (0, 1) and err in (0, 1)


@SETTINGS
@given(st.data())
def test_install_key_refuses_exactly_the_flawed_inputs(draw):
    model = GcmCoreModel(contexts=4)
    (ctx_ok, ctx), (key_ok, key) = draw.draw(value(4, st.integers(0, 15))), draw.draw(value(256, st.integers(0, 9)))
    before = _state(model)
    try:
        model.install_key(ctx, key)
    except GcmInputError:
        assert not (ctx_ok and key_ok) and _state(model) == before
        return
    assert ctx_ok and key_ok


def test_type_errors():
    model = GcmCoreModel()
    for bad in (1.0, "1", None):
        with pytest.raises(GcmInputTypeError):
            model.step(bad, 0, Op.NOP, 0)
        with pytest.raises(GcmInputTypeError):
            model.install_key(0, bad)
    with pytest.raises(GcmInputTypeError):
        j0_block("twelve chars")


@SETTINGS
@given(st.one_of(st.binary(max_size=16), NOT_INTS, st.lists(st.integers(0, 255), max_size=12)))
def test_j0_block_refuses_what_is_not_a_nonce(nonce):
    try:
        j0 = j0_block(nonce)
    except GcmInputError:
        assert not isinstance(nonce, bytes) or len(nonce) != 12
        return
    assert j0.to_bytes(16, "little") == nonce + b"\0\0\0\1"
