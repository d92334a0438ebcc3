"""Unit tests of the payload codec (:mod:`sw.common.payload`) and the packet header
(:mod:`sw.common.packet`)."""
import random

import pytest
from amaranth.lib import data, enum

from hw.sxp.packet import Header, Kind, beat_layout
from sw.common.packet import HEADER_FIELDS, header
from sw.common.payload import field_slices, pack, unpack


class Colour(enum.Enum, shape=2):
    RED = 0
    GREEN = 1
    BLUE = 3


INNER = data.StructLayout({"colour": Colour, "n": 5})           # 7 bits
OUTER = data.StructLayout({
    "flag": 1,
    "inner": INNER,
    "row": data.ArrayLayout(INNER, 3),
    "either": data.UnionLayout({"word": 7, "inner": INNER}),
    "tail": 4,
})


def test_field_slices():
    assert field_slices(OUTER) == {"flag": (0, 1), "inner": (1, 7), "row": (8, 21), "either": (29, 7),
                                   "tail": (36, 4)}
    assert field_slices(data.ArrayLayout(3, 4)) == {0: (0, 3), 1: (3, 3), 2: (6, 3), 3: (9, 3)}


def test_pack_places_fields():
    assert pack(INNER, colour=Colour.BLUE) == 3
    assert pack(INNER, n=0x11) == 0x11 << 2
    assert pack(OUTER, flag=True) == 1
    assert pack(OUTER, inner={"n": 1}) == 1 << 3
    assert pack(OUTER, row=[0, 0, {"colour": Colour.GREEN}]) == 1 << (8 + 14)
    assert pack(OUTER, tail=0xF) == 0xF << 36
    assert pack(data.ArrayLayout(4, 3), [1, 2, 3]) == 0x321
    assert pack(data.ArrayLayout(4, 3), {2: 5}) == 0x500


def test_nested_round_trip():
    rng = random.Random(1)
    for _ in range(200):
        inner = [{"colour": rng.choice(list(Colour)), "n": rng.getrandbits(5)} for _ in range(4)]
        fields = {"flag": rng.getrandbits(1), "inner": inner[0], "row": inner[1:],
                  "either": {"inner": inner[0]}, "tail": rng.getrandbits(4)}
        value = pack(OUTER, **fields)
        assert value == pack(OUTER, dict(fields, inner=pack(INNER, **inner[0]),
                                         row=pack(OUTER["row"].shape, inner[1:])))
        got = unpack(OUTER, value, nested=True)
        assert got == dict(fields, row=dict(enumerate(inner[1:])), either={"word": pack(INNER, **inner[0]),
                                                                             "inner": inner[0]})
        assert pack(OUTER, got) == value                # a union's members overlap: both agree
        flat = unpack(OUTER, value)
        assert flat["inner"] == pack(INNER, **inner[0]) and flat["tail"] == fields["tail"]
        assert unpack(INNER, flat["inner"]) == inner[0]


def test_enum_fields():
    assert unpack(INNER, pack(INNER, colour=Colour.GREEN))["colour"] is Colour.GREEN
    assert unpack(INNER, pack(INNER, colour=Colour.GREEN), enums=False)["colour"] == 1
    assert unpack(INNER, 2)["colour"] == 2              # not a member: the raw value
    assert pack(INNER, colour=Colour.BLUE) == pack(INNER, colour=3)


@pytest.mark.parametrize("layout, fields, message", [
    (INNER, {"n": 32}, "field n = 0x20 does not fit in 5 bits"),
    (INNER, {"n": -1}, "field n = -0x1 does not fit in 5 bits"),
    (OUTER, {"inner": 1 << 7}, "field inner = 0x80 does not fit in 7 bits"),
    (OUTER, {"inner": {"n": 40}}, "field inner.n = 0x28 does not fit in 5 bits"),
    (OUTER, {"row": [0, {"n": 32}, 0]}, r"field row\[1\].n = 0x20 does not fit in 5 bits"),
    (OUTER, {"either": {"word": 128}}, "field either.word = 0x80 does not fit in 7 bits"),
    (OUTER, {"tail": 16}, "field tail = 0x10 does not fit in 4 bits"),
    (OUTER, {"row": [0, 0]}, "2 elements for row of 3"),
])
def test_out_of_range_raises(layout, fields, message):
    with pytest.raises(ValueError, match=message):
        pack(layout, **fields)


def test_bad_names_and_values():
    with pytest.raises(KeyError, match="no field colour"):
        pack(OUTER, colour=1)
    with pytest.raises(KeyError, match="no field x of inner"):
        pack(OUTER, inner={"x": 1})
    with pytest.raises(TypeError):
        pack(OUTER, tail={"x": 1})                      # not a layout field
    with pytest.raises(TypeError):
        pack(OUTER, {"tail": 1}, flag=1)
    with pytest.raises(TypeError):
        pack(7, a=1)


def test_cache_follows_the_layout_object():
    # a new layout object with the id of a dead one must not get the dead one's fields
    for width in range(1, 40):
        layout = data.StructLayout({"a": width, "b": 1})
        assert field_slices(layout)["b"] == (width, 1)
        assert pack(layout, b=1) == 1 << width


def test_beat_matches_amaranth_const():
    """The codec places fields where Amaranth itself does."""
    lay = beat_layout(2)
    rng = random.Random(2)
    for _ in range(50):
        hdr = header(kind=rng.randrange(3), tile=rng.getrandbits(11), addr=rng.getrandbits(32),
                     length=rng.getrandbits(11), tag=rng.getrandbits(8), aes=1)
        word = rng.getrandbits(256)
        value = pack(lay, data=word, hdr=hdr, first=1, last=0)
        const = lay.const({"data": word, "hdr": {**hdr, "kind": Kind(hdr["kind"])}, "first": 1, "last": 0})
        assert value == const.as_value().value
        assert unpack(Header, unpack(lay, value)["hdr"], enums=False) == hdr


def test_header():
    h = header(kind=Kind.READ_CPL, tile=5, aes=True)
    assert list(h) == list(HEADER_FIELDS) == [name for name, _ in Header]
    assert h == dict.fromkeys(HEADER_FIELDS, 0) | {"kind": 2, "tile": 5, "aes": 1}
    assert type(h["kind"]) is int and type(h["aes"]) is int
    assert header(kind=3)["kind"] == 3                  # junk a receiver must tolerate
    e = header(kind_enum=True, kind=1, addr=0x40)
    assert e["kind"] is Kind.READ_REQ and e["addr"] == 0x40
    assert header(kind_enum=True)["kind"] is Kind.WRITE_REQ
    with pytest.raises(ValueError):
        header(kind_enum=True, kind=3)
    with pytest.raises(ValueError, match="header field tile = 0x800 does not fit in 11 bits"):
        header(tile=1 << 11)
    with pytest.raises(ValueError, match="addr"):
        header(addr=-16)
    with pytest.raises(KeyError, match="no header field bogus"):
        header(bogus=1)


def test_header_is_one_function():
    from sw.pcie.beats import header as pcie_header
    from sw.sxp.model import header as sxp_header
    assert pcie_header is header
    assert sxp_header(kind=Kind.READ_REQ, tile=3) == header(kind_enum=True, kind=1, tile=3)
