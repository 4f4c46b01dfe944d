"""The frameworks the harness knows, in table order, and the module that implements each.

Importing this package imports no array library: ``run.py`` reads the registry in the parent
process and each framework's module is imported only inside the fresh worker process that runs it.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    name: str  # the row name, and what --frameworks takes
    module: str  # benchmarks.workloads.<module>
    needs: tuple  # importable modules it needs; missing -> "not installed"
    numpy_memory: bool  # its arrays are NumPy's, so tracemalloc sees them (W7)
    about: str  # one line for the table's legend
    workloads: tuple = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")  # the others are "—"
    compiles: bool = False  # a first call that compiles (minutes on a long chain): a process per workload


#: the gt.function rows' workloads: no W6 (a 100,000-op chain unrolled) nor W7 (the tape's memory)
TRACED_WORKLOADS = ("W1", "W2", "W3", "W4", "W5")


FRAMEWORKS = [
    Framework("gradtape-numpy", "gradtape_bench", ("gradtape", "numpy"), True, "gradtape, NumPy backend (the default)"),
    Framework(
        "gradtape-torch",
        "gradtape_bench",
        ("gradtape", "torch"),
        False,
        "gradtape, PyTorch backend (CPU; `--device gpu`: CUDA)",
    ),
    Framework(
        "gradtape-jax",
        "gradtape_bench",
        ("gradtape", "jax"),
        False,
        "gradtape, JAX backend (eager; CPU, or its GPU with `--device gpu`)",
    ),
    Framework(
        "gradtape-array_api_strict",
        "gradtape_bench",
        ("gradtape", "array_api_strict"),
        True,
        "gradtape, array_api_strict backend (NumPy underneath)",
    ),
    Framework(
        "gradtape-cupy",
        "gradtape_bench",
        ("gradtape", "cupy"),
        False,
        "gradtape, CuPy backend (GPU only: `--device gpu`)",
    ),
    Framework(
        "gradtape.function-numpy",
        "gradtape_bench",
        ("gradtape", "numpy"),
        True,
        "the `gradtape-numpy` step in `gt.function`: traced on its first call, then replayed",
        TRACED_WORKLOADS,
    ),
    Framework(
        "gradtape.function-torch",
        "gradtape_bench",
        ("gradtape", "torch"),
        False,
        "the `gradtape-torch` step in `gt.function`: traced, then replayed (no compiler)",
        TRACED_WORKLOADS,
    ),
    Framework(
        "gradtape.function-torch-compile",
        "gradtape_bench",
        ("gradtape", "torch"),
        False,
        "the `gradtape-torch` step in `gt.function(jit_compile=True)`: traced, then `torch.compile`d "
        "(make_fx + inductor)",
        TRACED_WORKLOADS,
        compiles=True,
    ),
    Framework(
        "gradtape.function-jax",
        "gradtape_bench",
        ("gradtape", "jax"),
        False,
        "the `gradtape-jax` step in `gt.function`: traced, then `jax.jit`-compiled",
        TRACED_WORKLOADS,
        compiles=True,
    ),
    Framework(
        "gradtape.function-jax-loop",
        "gradtape_bench",
        ("gradtape", "jax"),
        False,
        "the W1/W2 chain written as `gt.while_loop(..., maximum_iterations=n)` in `gt.function` on JAX: one "
        "loop step (`lax.scan`), as the `jax.jit(jax.grad)` anchor's `lax.fori_loop`",
        ("W1", "W2"),
        compiles=True,
    ),
    Framework(
        "gradtape.function-array_api_strict",
        "gradtape_bench",
        ("gradtape", "array_api_strict"),
        True,
        "the `gradtape-array_api_strict` step in `gt.function`: traced, then replayed",
        TRACED_WORKLOADS,
    ),
    Framework(
        "torch.autograd",
        "torch_bench",
        ("torch",),
        False,
        "PyTorch eager autograd (`torch.autograd.grad`; W5: "
        "`torch.autograd.functional.jacobian`) — the ratio reference",
    ),
    Framework("torch.func", "torch_bench", ("torch",), False, "`torch.func.jacrev` (W5 only)", ("W5",)),
    Framework(
        "torch.compile",
        "torch_bench",
        ("torch",),
        False,
        "the `torch.autograd` step (forward, `torch.autograd.grad`, SGD update) in "
        "`torch.compile(fullgraph=True)` with dynamo's `trace_autograd_ops`: one inductor graph; "
        "compile time excluded",
        ("W1", "W2", "W3", "W4"),
        compiles=True,
    ),
    Framework("jax.grad", "jax_bench", ("jax",), False, "`jax.grad` un-jitted (eager; W5: `jax.jacrev`)"),
    Framework(
        "jax.jit(jax.grad)",
        "jax_bench",
        ("jax",),
        False,
        "`jax.jit(jax.grad(f))` (chains as `lax.fori_loop`; compile time excluded)",
        compiles=True,
    ),
    Framework(
        "jax.jit(jax.grad)-unrolled",
        "jax_bench",
        ("jax",),
        False,
        "`jax.jit(jax.grad(f))` of the chain as an unrolled Python loop, the program `gt.function` hands "
        "to `jax.jit` (W1/W2; compile time excluded)",
        ("W1", "W2"),
        compiles=True,
    ),
    Framework(
        "autograd", "hips_autograd_bench", ("autograd",), True, "HIPS `autograd` (`autograd.grad`, `autograd.jacobian`)"
    ),
    Framework("tensorflow", "tensorflow_bench", ("tensorflow",), False, "TensorFlow 2 eager `tf.GradientTape`"),
    Framework("numpy-hand", "numpy_bench", ("numpy",), True, "hand-written NumPy forward + backward (+ SGD)"),
    Framework(
        "minitape-numpy",
        "numpy_bench",
        ("numpy",),
        True,
        "a minimal Python tape on NumPy (~40 lines; chains only)",
        ("W1", "W2", "W6"),
    ),
    Framework(
        "numpy-forward",
        "numpy_bench",
        ("numpy",),
        True,
        "NumPy forward pass only, no gradient (chains only)",
        ("W1", "W2", "W6"),
    ),
]

BY_NAME = {f.name: f for f in FRAMEWORKS}

#: the row every ratio is taken against
REFERENCE = "torch.autograd"


def missing(fw: Framework):
    """None when every library ``fw`` needs is importable here, else the first missing one."""
    for mod in fw.needs:
        if importlib.util.find_spec(mod) is None:
            return mod
    return None


def load(fw: Framework):
    return importlib.import_module(f".{fw.module}", __name__)
