"""Cycle timing of the ``bcu``'s non-blocking RCache engine, from the golden model's
classification (docs/gpushield.md, "Micro-architecture and timing").

:class:`EngineTiming` gives the cycle each request's answer is transferred on ``resp``,
request by request (:meth:`EngineTiming.present`), from the cycle the request was first
presented on ``req``, the golden model's micro-ops (their level: ``"direct"``, ``"L1"``,
``"L2"``, ``"mem"``; their slot and encrypted id), and the memory's turnaround of each RBT
fetch; :func:`answer_cycles` runs it over a list of requests presented up front, and
``sw/gpushield/lsu_model.py`` over an SM's load/store stream as it issues. It applies the
documented rules, micro-op by micro-op in order, with ``resp`` and ``mem_req`` always ready:

1. Front: micro-op *k* of a request presented in cycle *p* can be in E from cycle
   ``p + front_registers + 1 + k``, and not before the cycle after the previous micro-op
   left E.
2. E: a micro-op leaves E after :data:`~hw.gpushield.engine.L1_CYCLES` = 1 cycle (no
   lookup, L1 hit), :data:`~hw.gpushield.engine.L2_CYCLES` = 2 (L2 hit) or
   :data:`~hw.gpushield.engine.MISS_CYCLES` = 1 (miss). A hit on an entry whose fetch
   (the latest miss of the same slot and encrypted id: entries are allocated at the miss)
   has not been answered yet starts only in the cycle after that answer. It leaves only in
   a cycle in which the answer queue has room (fewer than
   :data:`~hw.gpushield.engine.QUEUE_DEPTH` entries), and a miss only when fewer than
   :data:`~hw.gpushield.engine.MAX_FETCHES` fetches are outstanding (issued, not answered).
3. Fetch: a miss's ``mem_req`` is transferred :data:`~hw.gpushield.engine.FETCH_DELAY` = 2
   cycles after its E cycle; its answer comes *turnaround* cycles after that.
4. Answer queue: a micro-op with its entry leaving E while the queue is empty goes to the
   checker in that cycle; otherwise it enters the queue and leaves it the cycle after the
   previous micro-op left, a miss not before the cycle after its memory answer.
5. Checker: the request's answer is on ``resp``
   :data:`~hw.gpushield.core.CHECKER_REGISTERS` = 3 cycles after its last micro-op left the
   engine.

The queue and ring occupancy are kept as the lists of cycles each entry was in them, so
the rules are applied exactly as stated, not approximated. Launches and stale micro-ops are
not modelled (the timing check does not launch during traffic).
"""
from hw.gpushield.core import CHECKER_REGISTERS
from hw.gpushield.engine import FETCH_DELAY, L1_CYCLES, L2_CYCLES, MAX_FETCHES, MISS_CYCLES, QUEUE_DEPTH

__all__ = ["E_CYCLES", "EngineTiming", "answer_cycles", "lone_latency"]

E_CYCLES = {"direct": L1_CYCLES, "L1": L1_CYCLES, "L2": L2_CYCLES, "mem": MISS_CYCLES}


class EngineTiming:
    """The engine's queue and fetch state, advanced one request at a time: requests must be
    presented in order, each not before the previous one.

    *turnaround*: the cycles from each fetch's ``mem_req`` transfer to its ``mem_resp``
    transfer — an int, a list indexed by fetch, or a callable of the fetch index.
    *front_registers*: :func:`hw.gpushield.front.front_registers`. *checker_registers*:
    the registers from the engine to ``resp``.
    """

    def __init__(self, turnaround, front_registers, queue_depth=QUEUE_DEPTH, max_fetches=MAX_FETCHES,
                 checker_registers=CHECKER_REGISTERS):
        for name, value, least in (("queue_depth", queue_depth, 1), ("max_fetches", max_fetches, 1),
                                   ("front_registers", front_registers, 0),
                                   ("checker_registers", checker_registers, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, not {value!r}")
        if not (callable(turnaround) or isinstance(turnaround, (int, list, tuple))):
            raise TypeError(f"turnaround must be an int, a list or a callable, not {type(turnaround).__name__}")
        self.turnaround, self.front_registers = turnaround, front_registers
        self.queue_depth, self.max_fetches, self.checker_registers = queue_depth, max_fetches, checker_registers
        self.prev_leave = self.prev_out = None
        self.prev_presented = None
        self.fetch_count = 0
        self.queued = []        # (push cycle, leave cycle) of micro-ops that went through the queue
        self.ring = []          # (E cycle, memory answer cycle) of the fetches that may still be outstanding
        self.latest_fill = {}   # (slot, eid) -> memory answer cycle of its latest miss

    def _fetch_turnaround(self, index):
        if callable(self.turnaround):
            return self.turnaround(index)
        if isinstance(self.turnaround, int):
            return self.turnaround
        return self.turnaround[index]

    def _queue_count(self, t):
        return sum(1 for push, out in self.queued if push < t <= out)

    def _outstanding(self, t):
        return sum(1 for alloc, answer in self.ring if alloc < t <= answer)

    def present(self, cycle, result, slot=0):
        """The ``resp`` transfer cycle of a request presented in *cycle* (not before the
        previous one's), whose golden-model *result* carries its micro-ops (``.uops``, each
        with ``.level`` and ``.eid``), for slot *slot*."""
        return self.present_uops(cycle, [(u.level, u.eid) for u in result.uops], slot)

    def present_uops(self, cycle, uops, slot=0):
        """:meth:`present` with the micro-ops given as ``(level, encrypted id)`` pairs (an id
        of None shares no entry with any other micro-op)."""
        if self.prev_presented is not None and cycle < self.prev_presented:
            raise ValueError(f"request presented in cycle {cycle}, before the previous one ({self.prev_presented})")
        uops = list(uops)
        if not uops:
            raise ValueError("a request has at least one micro-op")
        self.prev_presented = cycle
        for k, (level, eid) in enumerate(uops):
            if level not in E_CYCLES:
                raise ValueError(f"unknown RCache level {level!r}")
            start = cycle + self.front_registers + 1 + k
            if self.prev_leave is not None:
                start = max(start, self.prev_leave + 1)
            key = None if eid is None else (slot, eid)
            if level in ("L1", "L2") and key in self.latest_fill:
                start = max(start, self.latest_fill[key] + 1)       # waits for the fill
            leave = start + E_CYCLES[level] - 1
            while (self._queue_count(leave) >= self.queue_depth
                   or (level == "mem" and self._outstanding(leave) >= self.max_fetches)):
                leave += 1
            if level == "mem":
                sent = leave + FETCH_DELAY
                answer = sent + self._fetch_turnaround(self.fetch_count)
                self.fetch_count += 1
                if key is not None:
                    self.latest_fill[key] = answer
                self.ring.append((leave, answer))
                out = answer + 1 if self.prev_out is None else max(answer + 1, self.prev_out + 1)
                self.queued.append((leave, out))
            elif self._queue_count(leave) == 0:
                out = leave                                         # straight to the checker
            else:
                out = max(leave + 1, self.prev_out + 1)
                self.queued.append((leave, out))
            self.prev_leave, self.prev_out = leave, out
            # drop what can no longer count (keeps the scans short on long streams)
            self.queued = [x for x in self.queued if x[1] >= leave]
            self.ring = [x for x in self.ring if x[1] >= leave]
        return self.prev_out + self.checker_registers


def answer_cycles(requests, turnaround, front_registers, queue_depth=QUEUE_DEPTH,
                  max_fetches=MAX_FETCHES):
    """The ``resp`` transfer cycle of each request.

    *requests*: ``(presented, result)`` or ``(presented, result, slot)`` in request order
    (*result* a :class:`~sw.gpushield.model.Result`, whose micro-ops carry their level and
    encrypted id; slot 0 if not given). *turnaround*, *front_registers*, *queue_depth*,
    *max_fetches*: those of :class:`EngineTiming`.
    """
    engine = EngineTiming(turnaround, front_registers, queue_depth, max_fetches)
    return [engine.present(item[0], item[1], item[2] if len(item) > 2 else 0) for item in requests]


def lone_latency(result, turnaround, front_registers):
    """Cycles from presenting *result*'s request to an idle unit to its answer (its fetches
    taking *turnaround* cycles each)."""
    return EngineTiming(turnaround, front_registers).present(0, result)
