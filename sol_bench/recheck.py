"""What a wrong timed iteration proves: a verdict that rests on evidence honest code cannot produce.

A timed iteration whose outputs are wrong after the correctness rounds passed is either honest code whose
numerics miss the tolerance on some inputs (the timed iterations draw fresh inputs too), or code that
computes differently in the timing phase. The judge tells them apart by replaying, untimed and under the
correctness protocol, in the candidate's own worker:

1. the failed iteration's exact inputs. Right outputs there: the same inputs gave wrong outputs timed and
   right ones untimed -> REWARD_HACK. Wrong, and the outputs then change while no call is in flight (the worker
   synchronized the device before replying, so honest code has finished): work left running past the call
   writes them -> REWARD_HACK. Without this look a late writer's backlog could land right results in step 2 by
   chance (a CI run under load saw a thread that writes after returning read INCORRECT_NUMERICAL).
2. otherwise, the inputs of the last correctness round, which passed, in the other buffer set than the one
   that round used. Wrong outputs there now: inputs the candidate once got right it no longer does (it
   stopped working after the rounds it expected to be checked, or it replays results cached by buffer
   address) -> REWARD_HACK.
3. otherwise the candidate is consistently wrong on those inputs, timed or not -> INCORRECT_NUMERICAL,
   with the statistics of the untimed replay.
"""

from __future__ import annotations

import time

from .buffers import Check, WorkloadBuffers, same_bits
from .errors import RewardHack, WrongNumbers

SETTLE_S = 0.5  # how long the outputs of a failed replay are watched for writes after the reply


def judge_timed_failure(buf: WorkloadBuffers, j: int, failed: Check, iteration: int, timed_error: WrongNumbers) -> None:
    """Replay the failed timed iteration ``iteration`` (its inputs and expected outputs in ``failed``) and
    raise the verdict the evidence supports; never returns."""
    first = str(timed_error).splitlines()[0]
    try:
        buf.untimed_call(j, failed, failed.inputs)
    except WrongNumbers as untimed:
        if _written_after_reply(buf, j):
            raise RewardHack(
                f"outputs of timed iteration {iteration} are wrong ({first}); replayed untimed on the same inputs, "
                "its outputs changed after the call had returned with the device idle: work left running past the "
                "call writes them"
            ) from None
        known = buf.known_good
        if known is not None:
            try:
                elsewhere = (buf.known_good_set + 1) % len(buf.sets)
                buf.untimed_call(elsewhere, known, known.inputs)
            except WrongNumbers as again:
                raise RewardHack(
                    f"outputs of timed iteration {iteration} are wrong ({first}), and inputs that passed the last "
                    f"correctness round now give wrong outputs too ({str(again).splitlines()[0]}): the candidate "
                    "stopped computing what it computed while it was checked (work skipped, or results cached by "
                    "buffer address)"
                ) from None
        raise WrongNumbers(
            f"{untimed}\nfound in the timed phase: timed iteration {iteration} gave wrong outputs ({first}); its "
            "inputs give wrong outputs untimed too, under the correctness protocol, while the correctness rounds' "
            "inputs still pass: the numerics miss the tolerance on some inputs",
            untimed.stats,
        ) from None
    raise RewardHack(
        f"outputs of timed iteration {iteration} are wrong ({first}), yet the same inputs gave right outputs in an "
        "untimed call under the correctness protocol: the candidate computes differently when it is timed"
    )


def _written_after_reply(buf: WorkloadBuffers, j: int) -> bool:
    """Whether set ``j``'s outputs change over ``SETTLE_S`` with no call in flight."""
    before = [o.clone() for o in buf.sets[j].outputs]
    time.sleep(SETTLE_S)
    buf.sync()
    return any(not same_bits(o, b) for o, b in zip(buf.sets[j].outputs, before))
