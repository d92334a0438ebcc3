"""The ``rts`` test environment (tb/rts/test_rts.py runs the tests).

:class:`RtsTB` drives ``extend`` and ``rd``, takes ``resp`` and ``rd_resp``, and keeps the
golden model (sw/rts, SHA-384 from hashlib) in step: extends are applied to the model in
the order they are queued (the store answers them in order), so every response is
compared with the model's status for its request. Each slot's history (its state after
every accepted extend, from the model) lets a read that overlaps extends be checked: it
must show one of the slot's states, never an older one than a previous read showed.
"""
from collections import deque

from hw.rts import MeasurementStore as RtlStore
from hw.rts.layout import extend_layout, extend_resp_layout, read_layout, slot_layout
from sw.rts import MeasurementStore, SlotState
from tb.common.payload import pack, unpack
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

__all__ = ["RtsTB", "design"]


def design():
    """The store under test as the RTL builds it (its constants: slots, latencies)."""
    store = RtlStore(**params("rts"))
    store._MustUse__used = True         # built for its constants only
    return store


class RtsTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        self.rtl = rtl = design()
        self.slots, self.owner_bits = rtl.slots, rtl.owner_bits
        self.ext_layout = extend_layout(rtl.slot_bits, rtl.owner_bits)
        self.resp_layout = extend_resp_layout(rtl.slot_bits)
        self.rd_layout = read_layout(rtl.slot_bits)
        self.slot_layout = slot_layout(rtl.owner_bits)
        self.ext = StreamSource(dut, "extend", self.clk)
        self.resp = StreamSink(dut, "resp", self.clk)
        self.rd = StreamSource(dut, "rd", self.clk)
        self.rd_resp = StreamSink(dut, "rd_resp", self.clk)
        self.model = MeasurementStore(self.slots, self.owner_bits)
        self.expected = deque()         # (slot, Status) of every extend queued, not yet answered
        self.history = {}
        self.read_floor = {}
        self.reset_model()

    def reset_model(self):
        self.model.reset()
        self.expected.clear()
        self.history = {s: [SlotState()] for s in range(self.slots)}
        self.read_floor = dict.fromkeys(range(self.slots), 0)

    def extend(self, slot, owner, value: bytes):
        """Queue an extend; the model takes it now. Returns the model's status."""
        status = self.model.extend(slot, owner, value)
        self.expected.append((slot, status))
        if status.name == "OK":
            self.history[slot].append(self.model.read(slot))
        self.ext.send(pack(self.ext_layout, slot=slot, owner=owner, value=int.from_bytes(value, "little")))
        return status

    async def check_responses(self, what, timeout=None):
        """Take a response for every extend queued and compare each with the model's."""
        # generous: an extend's latency stretched by idle cycles and back-pressure
        timeout = timeout or 50 * (self.rtl.extend_latency + 1)
        n = 0
        while self.expected:
            slot, status = self.expected.popleft()
            got = unpack(self.resp_layout, await self.resp.recv(timeout))
            assert (got["slot"], got["status"]) == (slot, status), \
                f"{what}: response {n}: RTL {got['slot']}/{got['status']}, model {slot}/{status}"
            n += 1
        return n

    def read_request(self, slot):
        self.rd.send(pack(self.rd_layout, slot=slot))

    async def read_result(self, timeout=2_000):
        got = unpack(self.rd_resp_layout, await self.rd_resp.recv(timeout))
        return SlotState(got["value"].to_bytes(48, "little"), got["owner"], bool(got["bound"]), got["count"])

    @property
    def rd_resp_layout(self):
        return self.slot_layout

    async def read(self, slot):
        self.read_request(slot)
        return await self.read_result()

    def check_overlapping_read(self, slot, got, what):
        """A read taken while extends may be in flight: one of the slot's states, not older
        than one read before."""
        states = self.history[slot]
        k = got.count
        assert k < len(states) and states[k] == got, \
            f"{what}: slot {slot} read {got} is none of its {len(states)} states"
        assert k >= self.read_floor[slot], f"{what}: slot {slot} went back from state {self.read_floor[slot]} to {k}"
        self.read_floor[slot] = k
