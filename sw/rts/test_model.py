"""The ``rts`` golden model against hashlib and against its contract (docs/rts.md): extend
chains, owner locks, saturation, bad inputs; the padded block against sw/sha's own padding
and block function (so the RTL's padding tail, which the model's block mirrors, is checked
against an independent SHA-384)."""
import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hw.rts.core import PAD_TAIL
from sw.rts import MeasurementStore, RtsInputError, RtsTypeError, SlotState, Status, extend_block, extend_value
from sw.sha import IV, compress, digest, pad

VALUE = st.binary(min_size=48, max_size=48)


def test_cold_state_is_zero():
    store = MeasurementStore()
    assert all(store.read(s) == SlotState(bytes(48), 0, False, 0) for s in range(64))
    assert store.refused == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), VALUE), max_size=12))
def test_extend_chain_against_hashlib(extends):
    """One owner extending random slots: every slot is the hashlib chain of its values."""
    store = MeasurementStore(slots=8)
    expect = {s: bytes(48) for s in range(8)}
    counts = dict.fromkeys(range(8), 0)
    for slot, value in extends:
        assert store.extend(slot, 5, value) is Status.OK
        expect[slot] = hashlib.sha384(expect[slot] + value).digest()
        counts[slot] += 1
    for s in range(8):
        got = store.read(s)
        assert got.value == expect[s] and got.count == counts[s]
        assert got.bound == (counts[s] > 0) and got.owner == (5 if counts[s] else 0)


@settings(max_examples=30, deadline=None)
@given(VALUE, VALUE)
def test_padded_block_is_sha384_of_old_and_value(old, value):
    """The block the hardware hashes is FIPS 180-4's padding of old ‖ value (sw/sha's pad),
    one block, and its compression from the initial hash value is hashlib's digest; the RTL's
    constant tail (hw.rts.core.PAD_TAIL) is bytes 96..127 of it."""
    block = extend_block(old, value)
    assert block == pad(old + value) and len(block) == 128
    assert digest(compress(IV, block)) == hashlib.sha384(old + value).digest() == extend_value(old, value)
    assert block[96:] == PAD_TAIL.to_bytes(32, "little")


def test_owner_lock():
    store = MeasurementStore(slots=4)
    a, b = random.randbytes(48), random.randbytes(48)
    assert store.extend(2, 7, a) is Status.OK
    before = store.read(2)
    assert before.bound and before.owner == 7
    assert store.extend(2, 8, b) is Status.REFUSED_OWNER
    assert store.read(2) == before and store.refused == 1
    assert store.extend(2, 7, b) is Status.OK            # the owner still may
    assert store.read(2).value == hashlib.sha384(hashlib.sha384(bytes(48) + a).digest() + b).digest()
    assert store.extend(3, 8, b) is Status.OK            # other slots are free to bind
    assert store.read(3).owner == 8 and store.refused == 1


def test_counters_saturate():
    store = MeasurementStore(slots=2)
    store.extend(0, 1, bytes(48))
    store._slots[0] = SlotState(store.read(0).value, 1, True, (1 << 32) - 1)
    store.refused = (1 << 32) - 1
    store.extend(0, 1, bytes(48))
    store.extend(0, 2, bytes(48))
    assert store.read(0).count == (1 << 32) - 1 and store.refused == (1 << 32) - 1


def test_reset_clears_everything():
    store = MeasurementStore(slots=4)
    store.extend(1, 3, random.randbytes(48))
    store.extend(1, 4, random.randbytes(48))
    store.reset()
    assert all(store.read(s) == SlotState() for s in range(4)) and store.refused == 0


@pytest.mark.parametrize("call, error", [
    (lambda s: s.extend(4, 0, bytes(48)), RtsInputError),        # wrong slot
    (lambda s: s.extend(-1, 0, bytes(48)), RtsInputError),
    (lambda s: s.extend(0, 256, bytes(48)), RtsInputError),      # owner id too wide
    (lambda s: s.extend(0, 0, bytes(47)), RtsInputError),        # wrong width
    (lambda s: s.extend(0, 0, bytes(49)), RtsInputError),
    (lambda s: s.extend(0, 0, "00" * 48), RtsTypeError),
    (lambda s: s.extend(1.0, 0, bytes(48)), RtsTypeError),
    (lambda s: s.extend(True, 0, bytes(48)), RtsTypeError),
    (lambda s: s.read(4), RtsInputError),
])
def test_bad_input_rejected(call, error):
    store = MeasurementStore(slots=4)
    with pytest.raises(error):
        call(store)
    assert issubclass(error, ValueError)
    assert all(store.read(s) == SlotState() for s in range(4)), "a rejected request changed a slot"


@pytest.mark.parametrize("args, error", [((3,), ValueError), ((True,), TypeError), ((64, 0), ValueError),
                                         ((64, 17), ValueError), ((64, 8.0), TypeError)])
def test_bad_parameters_rejected(args, error):
    with pytest.raises(error):
        MeasurementStore(*args)
