"""Soak campaign ``gcm`` (``make soak CAMPAIGN=gcm``, scripts/soak.py): random frames
through ``gcm_core`` against OpenSSL, in batches, until ``SOAK_COUNT`` frames have passed.

Each batch is the regression's random traffic (:func:`tb.gcm.env.random_traffic`): frames
on all 16 contexts with random keys, nonces and every legal length up to 1 KiB, encrypt
and decrypt (OpenSSL-sealed, one in five with a forged tag), key reinstalls between frames,
all contexts interleaved beat by beat with NOP beats, random idle cycles and back-pressure
(drawn per batch). :class:`tb.gcm.env.GcmTB` checks every output beat against the golden
model; here every frame is also judged against OpenSSL (``cryptography``'s AESGCM), which
does not depend on the model:

- *accepted*: a forged decrypt frame the core passed (``tag_ok``);
- *lost*: a good frame that did not come through intact: an encrypt frame whose ciphertext
  and tag OpenSSL rejects, a genuine decrypt frame with the wrong plaintext or without
  ``tag_ok``, or any frame with ``err`` set.

The tallies go to the JSON file ``SOAK_STATS`` (also when a check fails); the test fails
on the first model mismatch or at the end if anything was accepted or lost.
"""
import json
import os
import random

import cocotb
from cocotb.utils import get_sim_time
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sw.gcm.vectors import blocks_of
from tb.common.sim import CLOCK_PERIOD_NS
from tb.common.stream import interleave, never, random_pause
from tb.gcm.env import LANES, GcmTB, frame_outputs, nop_items, random_traffic

FRAMES_PER_CTX = 4          # a batch: 64 frames


def judge(tb, frames):
    """(accepted, lost, first problem) of a batch's *frames* (random_traffic's tuples),
    from what the RTL produced, against OpenSSL."""
    accepted = lost = 0
    problem = ""
    for label, key, nonce, pt, decrypt, forged in frames:
        data, tag, tag_ok, errs = frame_outputs(tb, label)
        if decrypt and forged:
            bad = tag_ok
            accepted += bool(bad)
            why = "a forged tag was accepted"
        else:
            if decrypt:
                bad = errs or not tag_ok or data != blocks_of(pt)
                why = "a genuine frame lost its plaintext or tag_ok"
            else:
                sealed = b"".join(b.to_bytes(16, "little") for b in data) + tag.to_bytes(16, "little")
                try:
                    bad = errs or AESGCM(key).decrypt(nonce, sealed, None) != pt
                except InvalidTag:
                    bad = True
                why = "OpenSSL rejects the sealed frame"
            lost += bool(bad)
        if bad and not problem:
            problem = f"frame {label} ({len(pt) // 16} blocks, key {key.hex()[:16]}…): {why}"
    return accepted, lost, problem


@cocotb.test()
async def soak(dut):
    count = int(os.environ.get("SOAK_COUNT", "256"))
    stats_file = os.environ.get("SOAK_STATS")
    tb = GcmTB(dut)
    await tb.reset()
    stats = {"attempts": 0, "accepted": 0, "lost": 0, "cycles": 0,
             "detail": {"decrypt": 0, "forged": 0, "blocks": 0, "batches": 0, "lanes": LANES}}
    problems = []
    try:
        while stats["attempts"] < count:
            # flow control of this batch: full speed, idle cycles, back-pressure or both
            idle, stall = random.choice([(0.0, 0.0), (0.0, 0.0), (0.2, 0.0), (0.0, 0.3), (0.2, 0.3)])
            for src in (tb.key_src, tb.i_src):
                src.set_pause(random_pause(idle) if idle else never())
            tb.sink.set_pause(random_pause(stall) if stall else never())
            lists, frames = random_traffic(FRAMES_PER_CTX)
            frames = frames[:count - stats["attempts"]] if stats["attempts"] + len(frames) > count else frames
            await tb.run(interleave(lists + [nop_items(random.randrange(16))]))
            accepted, lost, problem = judge(tb, frames)
            tb.results.clear()          # the batch is judged: keep memory flat over 10⁶ frames
            stats["attempts"] += len(frames)
            stats["accepted"] += accepted
            stats["lost"] += lost
            d = stats["detail"]
            d["decrypt"] += sum(f[4] for f in frames)
            d["forged"] += sum(f[5] for f in frames)
            d["blocks"] += sum(len(f[3]) // 16 for f in frames)
            d["batches"] += 1
            if problem:
                problems.append(problem)
    finally:
        stats["cycles"] = round(get_sim_time("ns") / CLOCK_PERIOD_NS)
        if stats_file:
            with open(stats_file, "w") as f:
                json.dump(stats, f)
    tb.log.info("soak gcm: %s", stats)
    assert not problems, f"{stats['accepted']} accepted, {stats['lost']} lost; first: {problems[0]}"
    assert stats["detail"]["forged"] > 0 or count < 64, "control: no forged frame was tried"
