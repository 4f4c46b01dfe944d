"""Quick XLA compiles for processes that check many small ops on JAX: the test suite's and the
``gradtape conformance`` / ``check`` / ``audit`` commands'.

Eager JAX compiles every op for every new shape and dtype (~50 ms each here), so a run that checks the
registry's ops on tiny arrays spends most of its time in XLA's compiler, not in running them (the
conformance pass on the jax backend: 413 compiles, 12 of 22 s for two ops). These settings compile the
same programs faster: XLA's cheaper passes (:func:`quick_jax_compiles`, before JAX is imported) and one
MLIR context per thread (:func:`reuse_mlir_contexts`, once JAX is loaded).  They are for such processes
only -- gradtape the library never sets them in its user's process.  ``GRADTAPE_TEST_XLA_DEFAULTS=1``
keeps JAX's defaults.
"""

from __future__ import annotations

import os
import sys
import threading

#: XLA's CPU options that compile the suite's small programs ~40% faster (CPU seconds of the gradient
#: checks of five ops, every case, on jax: 31-35 s as JAX sets them, 17-20 s so): JAX's own
#: ``jax_disable_most_optimizations`` ("useful if the cost of optimization is greater than that of running
#: a less-optimized program": LLVM at -O0, no expensive passes) and XLA:CPU's loop emitters instead of its
#: fusion emitters.  Neither changes what is computed (no fast-math; IEEE arithmetic as before).
QUICK_XLA_CPU_FLAGS = ("--xla_cpu_use_fusion_emitters=false",)


def _xla_knows(flag):
    """Whether the installed jaxlib's XLA parses ``flag`` (an unknown flag in XLA_FLAGS aborts the process):
    its name is in the library's strings."""
    import importlib.util
    import mmap

    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return False
    name = flag.lstrip("-").split("=", 1)[0].encode() + b"\0"
    for folder in spec.submodule_search_locations:
        for lib in ("libjax_common.so", "xla_extension.so"):
            try:
                with open(os.path.join(folder, lib), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    if m.find(name) >= 0:
                        return True
            except (OSError, ValueError):
                continue
    return False


def quick_jax_compiles():
    """Set the compile options above for this process and its children (before JAX is imported), unless
    ``GRADTAPE_TEST_XLA_DEFAULTS=1`` (JAX's defaults) or the environment already sets them."""
    if os.environ.get("GRADTAPE_TEST_XLA_DEFAULTS") == "1" or "jax" in sys.modules:
        return
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in QUICK_XLA_CPU_FLAGS:
        if flag.split("=", 1)[0] not in flags and _xla_knows(flag):
            flags = f"{flags} {flag}".strip()
    if flags:
        os.environ["XLA_FLAGS"] = flags


#: lowerings into one MLIR context before the next is made (a context keeps every type and attribute it
#: interned until it is dropped)
MLIR_CONTEXT_USES = 256


def reuse_mlir_contexts():
    """Once JAX is loaded: lower JAX's programs into one MLIR context per thread, a fresh one every
    :data:`MLIR_CONTEXT_USES` lowerings, where JAX makes a context per program
    (``jax._src.interpreters.mlir.make_ir_context``, which loads its dialects anew each time: ~6 ms of
    each eager compile of a new shape here; one compile takes ~20% less CPU time so, measured in one process
    alternating the two).  What is lowered is the same; only where its types are interned differs.
    Not done with ``GRADTAPE_TEST_XLA_DEFAULTS=1``, nor where JAX has no such function."""
    mlir = sys.modules.get("jax._src.interpreters.mlir")
    if mlir is None or os.environ.get("GRADTAPE_TEST_XLA_DEFAULTS") == "1":
        return
    fresh = getattr(mlir, "make_ir_context", None)
    if fresh is None or getattr(fresh, "reused_by_the_suite", False):
        return
    per_thread = threading.local()

    def make_ir_context():
        uses = getattr(per_thread, "uses", MLIR_CONTEXT_USES)
        if uses >= MLIR_CONTEXT_USES:
            per_thread.context, uses = fresh(), 0
        per_thread.uses = uses + 1
        return per_thread.context

    make_ir_context.reused_by_the_suite = True
    mlir.make_ir_context = make_ir_context
