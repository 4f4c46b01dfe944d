"""Which tapes record, per thread, and the running recording context: the state that tensors,
dispatch and the tape all read.

It sits below ``tensor`` so that a Tensor can ask whether a recording tape connects it to a
watched source (the gradient-leak check of its conversions) without importing the tape.

A *recording context* is an object registered from above the core (``gt.function``'s capture is
the one there is) that records the native calls of the thread that opened it.  The core knows it
only through this module and calls only two of its methods: ``on_variable(v)`` (a Variable was
created while it runs) and ``mixed_backends(b1, b2)`` (an op got tensors of two backends: it raises
its own error where one of them is its backend, and returns otherwise).
"""

from __future__ import annotations

import threading

__all__ = [
    "active_context",
    "connected_tapes",
    "on_variable_created",
    "recording_context",
    "ACTIVE_TAPES",
    "active_tapes_lock",
    "add_active_tapes",
    "per_thread",
]


class _State(threading.local):
    def __init__(self):
        self.tapes = []  # the recordings (``_engine._Recording``) of this thread, innermost last
        self.reach = None  # the identities the running backward walk wants (``Node.needs_grad``)


per_thread = _State()
#: the running recording context, or None: one at a time per process (``gt.function``'s swaps every
#: live Variable's value for a stand-in while it runs); it has a ``thread`` (the thread that opened it)
recording_context = [None]


def active_context():
    """The running recording context if this thread runs it (another thread's draws and variables are
    its own)."""
    c = recording_context[0]
    return c if c is not None and c.thread == threading.get_ident() else None


def on_variable_created(v):
    """Variable ``v`` was just created: the running recording context of this thread, if any, is told
    (``gt.function``'s makes it the program's state)."""
    c = recording_context[0]
    if c is not None and c.thread == threading.get_ident():
        c.on_variable(v)


#: number of recording tapes over all threads: ``ACTIVE_TAPES[0] == 0`` lets every op skip the
#: thread-local lookup (the not-recording fast path)
ACTIVE_TAPES = [0]
active_tapes_lock = threading.Lock()


def add_active_tapes(delta):
    with active_tapes_lock:
        ACTIVE_TAPES[0] += delta


def connected_tapes(tensor_id):
    """The recordings of this thread on which ``tensor_id`` is watched or computed from a watched
    tensor (empty when nothing records: one list read)."""
    if not ACTIVE_TAPES[0]:
        return ()
    return [rec for rec in per_thread.tapes if tensor_id in rec.watched]
