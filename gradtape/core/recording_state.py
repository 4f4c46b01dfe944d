"""Which tapes record, per thread: the state that tensors, dispatch and the tape all read.

It sits below ``tensor`` so that a Tensor can ask whether a recording tape connects it to a
watched source (the gradient-leak check of its conversions) without importing the tape.
"""

from __future__ import annotations

import threading

__all__ = ["active_trace", "connected_tapes"]


class _State(threading.local):
    def __init__(self):
        self.tapes = []  # the recordings (``_engine._Recording``) of this thread, innermost last
        self.reach = None  # the identities the running backward walk wants (``Node.needs_grad``)


_state = _State()
#: the running ``gt.function`` trace (``gradtape.backends.tracing.Trace``), or None: one at a time per process
#: (a trace swaps every live Variable's value for a stand-in while it runs)
tracing = [None]


def active_trace():
    """The running trace if this thread runs it (another thread's draws and variables are its own)."""
    t = tracing[0]
    return t if t is not None and t.thread == threading.get_ident() else None


#: number of recording tapes over all threads: ``_ACTIVE[0] == 0`` lets every op skip the
#: thread-local lookup (the not-recording fast path)
_ACTIVE = [0]
_active_lock = threading.Lock()


def _activate(delta):
    with _active_lock:
        _ACTIVE[0] += delta


def connected_tapes(tensor_id):
    """The recordings of this thread on which ``tensor_id`` is watched or computed from a watched
    tensor (empty when nothing records: one list read)."""
    if not _ACTIVE[0]:
        return ()
    return [rec for rec in _state.tapes if tensor_id in rec.watched]
