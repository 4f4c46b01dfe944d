#!/usr/bin/env python3
"""gradtape's benchmark harness (issue 6): one command, every workload, every installed framework.

    python benchmarks/run.py                       # everything (~30 min on a 2-core machine)
    python benchmarks/run.py --quick               # fewer repeats, one process per framework (~20 min:
                                                   # the compiled rows' unrolled W1/W2 chains compile for minutes)
    python benchmarks/run.py --only W1,W3 --frameworks gradtape,torch.autograd
    python benchmarks/run.py --out docs/perf.md --json results.json
    python benchmarks/run.py --quick --only W1,W2,W3,W4 --frameworks gradtape.function,jax.jit,torch.compile

Each (framework, workload) runs in a fresh ``subprocess`` (``--quick``: one per framework, W7 and
the cells of a compiled row always alone) with one thread per framework (``OMP_NUM_THREADS=1`` and
friends, ``torch.set_num_threads(1)``, ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false ...``),
warm-up calls first, then the median of repeats.  Prints a markdown table of times and ratios to
``torch.autograd``, the memory of W7, the first calls of compiled steps (``gt.function``,
``jax.jit``, ``torch.compile``: trace + compile, never in the medians), and which of the targets of
issues 6 and 12 are met.  Progress goes to stderr (a line per cell, and a bar over the cells when
stderr is a terminal; ``--no-progress``: no bar), the report to stdout (and ``--out``); ``--json``
keeps every raw figure.

These are benchmark figures, not assertions: nothing here fails on a slow number.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from workloads import FRAMEWORKS, REFERENCE, missing  # noqa: E402
from workloads.common import UNITS, WORKLOADS  # noqa: E402

WORKER = os.path.join(HERE, "workloads", "_worker.py")

#: one thread per framework; set before the worker imports anything
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "JAX_PLATFORMS": "cpu",
    "CUDA_VISIBLE_DEVICES": "",
    "PYTHONHASHSEED": "0",
}
#: W7 only: freed arrays go straight back to the OS, so RSS follows live memory (glibc)
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072"}

#: figures quoted by issue 6 (its 2-core machine, one thread) — never measured here
ISSUE_FIGURES = {
    ("torch.autograd", "W1"): 4.8,
    ("tensorflow", "W1"): 33.0,
    ("autograd", "W1"): 11.7,
    ("jax.grad", "W1"): 117.0,
    ("minitape-numpy", "W1"): 1.46,
    ("numpy-forward", "W1"): 0.39,
    ("tensorflow", "W5"): 47.0,
    ("torch.func", "W5"): 0.55,
    ("torch.autograd", "W6"): 0.88,
    ("tensorflow", "W6"): 4.0,
    ("numpy-hand", "W7"): 59.0,
    ("torch.autograd", "W7"): 68.0,
}


# ---------------------------------------------------------------------------------------- selection
def select_frameworks(spec):
    if not spec:
        return list(FRAMEWORKS)
    out = []
    for tok in [t.strip() for t in spec.split(",") if t.strip()]:
        # a row's exact name is that row only (gradtape.function-torch, not -torch-compile too)
        hits = [f for f in FRAMEWORKS if f.name == tok] or [
            f
            for f in FRAMEWORKS
            if f.name.startswith(tok + "-")
            or f.name.startswith(tok + ".")
            or f.name.startswith(tok + "(")
            or fnmatch.fnmatchcase(f.name, tok)
        ]
        if not hits:
            raise SystemExit(f"run.py: unknown framework {tok!r}; known: " + ", ".join(f.name for f in FRAMEWORKS))
        out += [f for f in hits if f not in out]
    return [f for f in FRAMEWORKS if f in out]


def select_workloads(spec):
    if not spec:
        return list(WORKLOADS)
    ws = [w.strip().upper() for w in spec.split(",") if w.strip()]
    bad = [w for w in ws if w not in WORKLOADS]
    if bad:
        raise SystemExit(f"run.py: unknown workload(s) {bad}; known: {', '.join(WORKLOADS)}")
    return [w for w in WORKLOADS if w in ws]


# ---------------------------------------------------------------------------------------- machine
def _lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    d = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            d[k.strip()] = v.strip()
    return d


def _version(dist):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _checkout():
    """The commit of this checkout, and how many files of the library differ from it."""

    def git(*a):
        try:
            return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    dirty = [ln for ln in git("status", "--porcelain", "--", "gradtape", "backends").splitlines() if ln]
    return f"{head}" + (f" + {len(dirty)} changed files in gradtape/ and backends/" if dirty else "")


def _gpu_name():
    """The first NVIDIA GPU's name (``nvidia-smi``), or None where there is none."""
    try:
        p = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else None


def machine_info():
    ls = _lscpu()
    info = {
        "cpu": ls.get("Model name") or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "cores_per_socket": ls.get("Core(s) per socket"),
        "threads_per_core": ls.get("Thread(s) per core"),
        "sockets": ls.get("Socket(s)"),
        "hypervisor": ls.get("Hypervisor vendor"),
        "l2": ls.get("L2 cache"),
        "l3": ls.get("L3 cache"),
        "platform": platform.platform(),
        "gpu": _gpu_name(),
        "python": platform.python_version(),
        "versions": {
            d: _version(d)
            for d in ("gradtape", "numpy", "torch", "jax", "jaxlib", "autograd", "array-api-strict", "tensorflow")
        },
    }
    info["checkout"] = _checkout()
    try:
        info["loadavg_start"] = os.getloadavg()
    except OSError:
        pass
    return info


# ---------------------------------------------------------------------------------------- running
def run_group(fw, workloads, args, log):
    """One fresh worker process for ``fw`` over ``workloads``; a record per workload.  A row that
    compiles (``fw.compiles``) gets ``--compile-timeout`` when that is longer; a torch row gets an
    empty inductor cache, so that a first call compiles cold (not from an earlier run's cache)."""
    timeout = max(args.timeout, args.compile_timeout) if fw.compiles else args.timeout
    cache = tempfile.mkdtemp(prefix="gradtape-bench-inductor-") if "torch" in fw.needs else None
    try:
        return _run_group(fw, workloads, args, log, timeout, cache)
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)


def _run_group(fw, workloads, args, log, timeout, cache):
    env = dict(os.environ)
    env.pop("GRADTAPE_BACKEND", None)
    env.update(THREAD_ENV)
    if os.environ.get("XLA_FLAGS"):
        env["XLA_FLAGS"] = os.environ["XLA_FLAGS"] + " " + THREAD_ENV["XLA_FLAGS"]
    if "W7" in workloads:
        env.update(MEMORY_ENV)
    if cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
    if args.device == "gpu":  # THREAD_ENV hides the GPUs (JAX_PLATFORMS=cpu, CUDA_VISIBLE_DEVICES="")
        env.pop("JAX_PLATFORMS", None)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # W7's peak is then what the step allocates
    cmd = [sys.executable, WORKER, "--framework", fw.name, "--workloads", ",".join(workloads)]
    cmd += ["--device", args.device]
    if args.quick:
        cmd.append("--quick")
    if args.tiny:
        cmd.append("--tiny")
    if args.profile:
        cmd += ["--profile", str(args.profile)]
    cmd += ["--clock", args.clock]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        stdout, stderr, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr, rc = f"timed out after {timeout:.0f} s", None
    recs, meta = {}, {}
    for line in stdout.splitlines():
        if line.startswith("@@BENCH "):
            d = json.loads(line[8:])
            if "meta" in d:
                meta.update(d["meta"])
            else:
                recs[d["workload"]] = d
    out = []
    for w in workloads:
        r = recs.get(w)
        if r is None:
            why = (
                f"timeout (> {timeout:.0f} s" + (", first call included)" if fw.compiles else ")")
                if rc is None
                else f"worker exited with {rc}: " + (stderr.strip().splitlines() or ["(no output)"])[-1]
            )
            r = {
                "framework": fw.name,
                "workload": w,
                "status": "timeout" if rc is None else "error",
                "reason": why[:500],
                "stderr_tail": stderr[-2000:],
            }
        r["process_wall_s"] = time.perf_counter() - t0
        r.update({f"meta_{k}": v for k, v in meta.items()})
        out.append(r)
        log(f"  {fw.name:<26} {w}: {short(r)}")
    return out


def short(r):
    s = r.get("status")
    if s != "ok":
        return f"{s}: {r.get('reason', '')}"[:160]
    w = r["workload"]
    if w == "W7":
        return f"peak {r['peak_mib']:.1f} MiB, held {r['held_mib']:.1f} MiB"
    _, unit, f = UNITS[w]
    return f"{fmt(value(r))} {unit} (median of {r['reps']})"


def value(r):
    """The table's figure for record ``r``: the time in the column's unit, or W7's peak MiB."""
    if r is None or r.get("status") != "ok":
        return None
    w = r["workload"]
    if w == "W7":
        return r["peak_mib"]
    _, _, factor = UNITS[w]
    per = r["median_s"] / (r["ops"] if w in ("W1", "W2") else 1)
    return per * factor


def fmt(v):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def fmt_ratio(x):
    if x is None or not math.isfinite(x):
        return ""
    return f"{x:.2f}×" if x < 10 else f"{x:.0f}×" if x >= 100 else f"{x:.1f}×"


# ---------------------------------------------------------------------------------------- targets
def first_call(r):
    """The first call of record ``r`` in seconds (wall; trace + compile for a compiled step)."""
    if r is None or r.get("status") != "ok":
        return None
    return r.get("first_call_s")


def targets(R):
    """The targets of issues 6 and 12 (``gt.function``), evaluated on the results
    ``R[(framework, workload)]``."""

    def v(fw, w):
        return value(R.get((fw, w)))

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    def scale(fw, w):
        """measured / issue figure for an anchor: how much slower this machine (and load) is."""
        m, q = v(fw, w), ISSUE_FIGURES.get((fw, w))
        return None if m is None or q is None else m / q

    rows = []

    def add(name, measured, target, unit, anchor=None, issue=6):
        met = None if measured is None else measured <= target
        k = scale(*anchor) if anchor else None
        rows.append(
            {
                "issue": issue,
                "target": name,
                "measured": measured,
                "target_value": target,
                "unit": unit,
                "met": met,
                "gap": None if measured is None else measured / target,
                "scaled_target": None if k is None else target * k,
                "scaled_met": None if k is None or measured is None else measured <= target * k,
                "anchor": None if anchor is None else f"{anchor[0]} {anchor[1]}",
            }
        )

    add("W1 gradtape-numpy ≤ 2.0 µs/op", v("gradtape-numpy", "W1"), 2.0, "µs/op", ("minitape-numpy", "W1"))
    add("W2 gradtape-numpy ≤ 2.2 µs/op", v("gradtape-numpy", "W2"), 2.2, "µs/op", ("minitape-numpy", "W1"))
    for w in ("W3", "W4"):
        add(
            f"{w} gradtape-torch ≤ 1.05 × torch.autograd",
            ratio(v("gradtape-torch", w), v("torch.autograd", w)),
            1.05,
            "×",
        )
    for w in ("W3", "W4"):
        add(f"{w} gradtape-jax ≤ 1.05 × jax.grad (eager)", ratio(v("gradtape-jax", w), v("jax.grad", w)), 1.05, "×")
    for w in ("W3", "W4"):
        add(
            f"{w} gradtape-numpy ≤ 1.1 × hand-written NumPy",
            ratio(v("gradtape-numpy", w), v("numpy-hand", w)),
            1.1,
            "×",
        )
    add(
        "W5 gradtape-torch ≤ 1.5 × torch.func.jacrev", ratio(v("gradtape-torch", "W5"), v("torch.func", "W5")), 1.5, "×"
    )
    tf5 = v("tensorflow", "W5")
    add(
        "W5 gradtape-torch ≥ 50× faster than TF tape.jacobian "
        + ("(measured)" if tf5 is not None else "(issue's 47 ms, not measured here)"),
        v("gradtape-torch", "W5"),
        (tf5 if tf5 is not None else 47.0) / 50,
        "ms",
        None if tf5 is not None else ("torch.func", "W5"),
    )
    add("W6 gradtape-numpy ≤ 0.5 s", v("gradtape-numpy", "W6"), 0.5, "s", ("torch.autograd", "W6"))
    add(
        "W7 gradtape-numpy peak ≤ 1.1 × hand-written NumPy",
        ratio(v("gradtape-numpy", "W7"), v("numpy-hand", "W7")),
        1.1,
        "×",
    )
    for fw in ("gradtape-numpy", "gradtape-torch", "gradtape-jax"):
        r = R.get((fw, "W7"))
        held = None
        if r is not None and r.get("status") == "ok":
            held = r.get("tm_held_alive_mib", r["held_alive_mib"])
            held = max(held, r.get("tm_held_mib", r["held_mib"]))
        add(f"W7 {fw}: nothing held after gradient() (tape alive or dropped; ≤ 1 MiB)", held, 1.0, "MiB")

    # issue 12: gt.function against each backend's own compiled step and the hand-written NumPy one
    for w in ("W1", "W2", "W3", "W4"):
        add(
            f"{w} gradtape.function-jax ≤ 1.2 × jax.jit(jax.grad)" + (" (fori_loop)" if w in ("W1", "W2") else ""),
            ratio(v("gradtape.function-jax", w), v("jax.jit(jax.grad)", w)),
            1.2,
            "×",
            issue=12,
        )
    for w in ("W1", "W2"):
        add(
            f"{w} gradtape.function-jax-loop (gt.while_loop) ≤ 1.2 × jax.jit(jax.grad) (fori_loop)",
            ratio(v("gradtape.function-jax-loop", w), v("jax.jit(jax.grad)", w)),
            1.2,
            "×",
            issue=12,
        )
    for w, t in (("W1", 1.5), ("W2", 1.5), ("W3", 1.05)):
        add(
            f"{w} gradtape.function-numpy ≤ {t:g} × hand-written NumPy",
            ratio(v("gradtape.function-numpy", w), v("numpy-hand", w)),
            t,
            "×",
            issue=12,
        )
    for w in ("W3", "W4"):
        add(
            f"{w} gradtape.function-torch no slower than torch.autograd (≤ 1 ×)",
            ratio(v("gradtape.function-torch", w), v("torch.autograd", w)),
            1.0,
            "×",
            issue=12,
        )
    for w in ("W1", "W2", "W3", "W4"):
        add(
            f"{w} gradtape.function-torch-compile ≤ 1.1 × torch.compile",
            ratio(v("gradtape.function-torch-compile", w), v("torch.compile", w)),
            1.1,
            "×",
            issue=12,
        )
    for fw, owns in OWN_COMPILER.items():
        own = owns[-1]
        a, b = first_call(R.get((fw, "W3"))), first_call(R.get((own, "W3")))
        add(f"W3 first call: {fw} ≤ 2 × {own}'s", ratio(a, b), 2.0, "×", issue=12)
    return rows


# ---------------------------------------------------------------------------------------- report
def report(results, frameworks, workloads, info, args, argv, elapsed):
    R = {(r["framework"], r["workload"]): r for r in results}
    notes = []

    def note(text):
        notes.append(text)
        return f"[{len(notes)}]"

    lines = []
    mode = "quick" if args.quick else "full"
    lines.append(
        f"## gradtape benchmarks — {mode} run"
        + (" (--tiny: shrunk workloads, numbers meaningless)" if args.tiny else "")
    )
    lines.append("")
    vers = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    absent = [k for k, v in info["versions"].items() if not v]
    la = info.get("loadavg_start")
    le = info.get("loadavg_end")
    lines.append(
        f"- Machine: {info['cpu']}, {info['cpus']} CPUs ({info.get('sockets')} socket × "
        f"{info.get('cores_per_socket')} cores × {info.get('threads_per_core')} thread"
        + (f", {info['hypervisor']} guest" if info.get("hypervisor") else "")
        + f"); "
        f"{info['platform']}; Python {info['python']}"
    )
    if info.get("checkout"):
        lines.append(f"- gradtape checkout: {info['checkout']}")
    lines.append(f"- Libraries: {vers}" + (f"; not installed: {', '.join(absent)}" if absent else ""))
    if la:
        lines.append(
            f"- Load average (1/5/15 min) at start {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}"
            + (f", at end {le[0]:.2f}/{le[1]:.2f}/{le[2]:.2f}" if le else "")
            + f"; run took {elapsed / 60:.1f} min"
        )
    lines.append(f"- Command: `{argv}`; {info.get('date', '')}")
    clock = (
        "process CPU time (`--clock cpu`: what the work costs, whatever else the machine runs)"
        if args.clock == "cpu"
        else "wall time (`--clock wall`)"
    )
    lines.append(
        f"- Method: one thread per framework; each "
        f"{'framework' if args.isolate == 'framework' else '(framework, workload)'} in a "
        "fresh process (W7 always alone); warm-up calls, then the median of repeats of "
        f"{clock}; `--json` has every repeat, in both clocks."
    )
    lines.append("")

    # ---- the table
    ref_name = REFERENCE
    cols = [w for w in workloads]
    head = ["framework"] + [f"{UNITS[w][0]} ({UNITS[w][1]})" for w in cols]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for fw in frameworks:
        cells = [f"`{fw.name}`"]
        absent_lib = missing(fw)
        for w in cols:
            r = R.get((fw.name, w))
            if absent_lib:
                cells.append("not installed")
                continue
            if w not in fw.workloads:
                cells.append("—")
                continue
            if r is None:
                cells.append("not run")
                continue
            st = r.get("status")
            if st == "ok":
                val = value(r)
                ref = value(R.get((ref_name, w)))
                txt = fmt(val)
                if w == "W7":
                    txt = f"{fmt(val)} / {fmt(r['held_mib'])}"
                if ref and fw.name != ref_name and val is not None:
                    txt += f" ({fmt_ratio(val / ref)})"
                odd = run_notes(r)
                if odd:
                    txt += f" {note(f'`{fw.name}` {w}: ' + '; '.join(odd))}"
                cells.append(txt)
            elif st == "n/a":
                cells.append("—")
            else:
                why = r.get("reason", "")
                cells.append(f"{st} {note(f'`{fw.name}` {w}: {st}: {why}')}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"Figures are medians; in parentheses the ratio to `{ref_name}` in the same column "
        "(W7: of the peak).  W1/W2: per chain step (`y = sin(y) * 1.0001 + 1e-6`, three ops) "
        "of a 2,000-step chain, forward + backward.  W7: MiB of RSS over the baseline just "
        "before the step (peak during the step / still held after it returns and the tape "
        "is dropped).  — : not applicable."
    )
    lines.append("")

    # ---- calibration against the issue's machine
    cal = [(k, ISSUE_FIGURES[k], value(R.get(k))) for k in ISSUE_FIGURES if R.get(k)]
    if cal:
        lines.append("### This machine against the issue's figures")
        lines.append("")
        lines.append("| anchor | workload | issue's figure | measured here | here / issue |")
        lines.append("|---|---|---|---|---|")
        for (fw, w), q, m in cal:
            unit = "MiB" if w == "W7" else UNITS[w][1]
            lines.append(
                f"| `{fw}` | {w} | {q:g} {unit} | {fmt(m)} {unit} | {fmt_ratio(m / q) if m is not None else '—'} |"
            )
        lines.append("")

    # ---- memory detail
    mem = [R.get((fw.name, "W7")) for fw in frameworks]
    mem = [r for r in mem if r is not None and r.get("status") == "ok"]
    if mem:
        lines.append("### W7 memory detail (MiB over the baseline; one W3 step at batch 4096)")
        lines.append("")
        lines.append(
            "| framework | RSS peak | RSS held, tape alive | RSS held, dropped | "
            "tracemalloc peak | tracemalloc held, tape alive | tracemalloc held, dropped |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for r in mem:
            tm = [fmt(r.get(k)) if k in r else "n/a" for k in ("tm_peak_mib", "tm_held_alive_mib", "tm_held_mib")]
            lines.append(
                f"| `{r['framework']}` | {fmt(r['peak_mib'])} | {fmt(r['held_alive_mib'])} | "
                f"{fmt(r['held_mib'])} | " + " | ".join(tm) + " |"
            )
        lines.append("")
        lines.append(
            "RSS: the kernel's high-water mark (`VmHWM`, reset through `/proc/self/clear_refs`) "
            "minus `VmRSS` before the step, after warm-up steps, with "
            "`MALLOC_MMAP_THRESHOLD_=65536` so freed arrays leave RSS; median of "
            f'{"1" if args.quick else "3"} steps.  "Tape alive": what the caller still '
            "references after the step (gradtape/TF: the tape; torch: the loss, which owns "
            "the graph).  tracemalloc: only where the arrays are NumPy's (it does not see "
            "torch's or XLA's buffers)."
        )
        lines.append("")

    # ---- first calls of compiled steps
    lines += first_call_table(R, frameworks, workloads)

    # ---- targets
    tg = targets(R)
    lines.append("### Targets (issue 6; issue 12: `gt.function`)")
    lines.append("")
    lines.append(
        "| issue | target | measured | met? | measured / target | target scaled to this machine (by anchor) "
        "| met, scaled? |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    partial = bool(args.only or args.frameworks)
    for t in tg:
        if partial and t["measured"] is None:
            continue  # a partial run: only the targets it measured
        unit = t["unit"]
        sep = "" if unit == "×" else " "
        m = "not measured" if t["measured"] is None else f"{fmt(t['measured'])}{sep}{unit}"
        met = "—" if t["met"] is None else ("**met**" if t["met"] else "missed")
        gap = "—" if t["gap"] is None else fmt_ratio(t["gap"])
        sc = "—" if t["scaled_target"] is None else f"{fmt(t['scaled_target'])}{sep}{unit} (by `{t['anchor']}`)"
        sm = "—" if t["scaled_met"] is None else ("**met**" if t["scaled_met"] else "missed")
        lines.append(f"| {t['issue']} | {t['target']} | {m} | {met} | {gap} | {sc} | {sm} |")
    lines.append("")
    lines.append(
        "Scaled targets: an absolute target of the issue multiplied by (this machine's "
        "figure / the issue's figure) for the anchor named, to discount a slower or busier "
        "machine.  The ratio targets need no scaling."
    )
    lines.append("")

    # ---- skips, checksums
    busy = [
        f"`{r['framework']}` {r['workload']} ({r['cpu_over_wall']:.2f})"
        for r in results
        if r.get("status") == "ok" and r.get("cpu_over_wall", 0) > 1.15
    ]
    if busy:
        lines.append(
            "CPU time exceeded wall time (more than one busy thread, despite the one-thread "
            "settings) in: " + ", ".join(busy) + "."
        )
        lines.append("")
    bad = checksum_mismatches(results)
    if bad:
        lines.append("Checksum disagreements (first step's gradient L1 norm vs `numpy-hand`): " + "; ".join(bad))
    else:
        lines.append(
            "Every framework's first-step gradients agree with the hand-written NumPy "
            "ones (L1 norm, within 1e-3 relative)."
        )
    lines.append("")
    if notes:
        lines.append("Notes:")
        lines.append("")
        for k, n in enumerate(notes, 1):
            lines.append(f"{k}. {n}")
        lines.append("")
    profs = [r for r in results if r.get("profile")]
    if profs:
        lines.append("### Profiles (cProfile of one call, top functions by own time)")
        lines.append("")
        for r in profs:
            lines.append(f"`{r['framework']}` {r['workload']}:")
            lines.append("")
            lines.append("```")
            lines.append(r["profile"].strip())
            lines.append("```")
            lines.append("")
    lines.append("Frameworks:")
    lines.append("")
    for fw in frameworks:
        lines.append(f"- `{fw.name}`: {fw.about}")
    lines.append("")
    return "\n".join(lines), tg


def run_notes(r):
    """What a table cell should footnote about how a compiled step ran: an executor other than the
    one expected (a compiler that failed replays; a program that disagreed with eager runs eagerly),
    retracing, gt.function's warnings on its first call."""
    out = []
    ex, want = r.get("executor"), r.get("executor_expected")
    if ex is not None and want is not None and ex != want:
        out.append(f"ran as {ex!r}, not {want!r}")
    if r.get("tracing_count", 1) > 1:
        out.append(f"traced {r['tracing_count']} times")
    out += [n for n in r.get("notes") or [] if "gt.function" in n]  # gradtape's; the JSON has all
    return out


#: the compiled anchor each gt.function row's first call is compared with (the first measured)
OWN_COMPILER = {
    "gradtape.function-jax": ("jax.jit(jax.grad)-unrolled", "jax.jit(jax.grad)"),
    "gradtape.function-jax-loop": ("jax.jit(jax.grad)",),
    "gradtape.function-torch-compile": ("torch.compile",),
}


def first_call_table(R, frameworks, workloads):
    """Markdown lines: the first call (trace + compile + one run, wall seconds) of each compiled or
    traced row, with the ratio to the backend's own compiler's first call where there is one."""
    rows = [f for f in frameworks if (f.compiles or f.name.startswith("gradtape.function")) and not missing(f)]
    cols = [w for w in workloads if w not in ("W6", "W7")]
    rows = [f for f in rows if any(first_call(R.get((f.name, w))) is not None for w in cols)]
    if not rows:
        return []
    lines = [
        "### First calls (s, wall; not in the medians above)",
        "",
        "| framework | " + " | ".join(cols) + " | runs as |",
        "|---|" + "---|" * (len(cols) + 1),
    ]
    for f in rows:
        cells = [f"`{f.name}`"]
        for w in cols:
            a = first_call(R.get((f.name, w)))
            b = next(filter(None, (first_call(R.get((o, w))) for o in OWN_COMPILER.get(f.name, ()))), None)
            txt = fmt(a)
            if a is not None and b:
                txt += f" ({fmt_ratio(a / b)})"
            cells.append(txt)
        ex = sorted({R[(f.name, w)].get("executor") for w in cols if R.get((f.name, w), {}).get("executor")})
        cells.append(", ".join(ex) if ex else "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "First call: the step's first call, wall time — for `gt.function` the trace (one eager run "
        "on stand-in arrays), the program's generation, its compilation and one checking run; for "
        "`jax.jit` and `torch.compile` compile + one run.  Torch rows start with an empty inductor "
        "cache, after a probe compile that starts inductor.  In parentheses: against the first call "
        "of the backend's own compiler (`jax.jit(jax.grad)`, its unrolled chain where measured; "
        "`torch.compile`) on the same workload.  Runs as: the executor `gt.function` ended with "
        "(`replay`: the program called op by op).",
        "",
    ]
    return lines


def checksum_mismatches(results, rtol=1e-3):
    ref = {
        r["workload"]: r.get("checksum") for r in results if r["framework"] == "numpy-hand" and r.get("status") == "ok"
    }
    bad = []
    for r in results:
        c, c0 = r.get("checksum"), ref.get(r["workload"])
        if c is None or c0 is None or r["framework"] == "numpy-hand":
            continue
        if abs(c - c0) > rtol * max(abs(c0), 1e-30):
            bad.append(f"`{r['framework']}` {r['workload']}: {c:.6g} vs {c0:.6g}")
    return bad


# ---------------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="fewer warm-ups and repeats, W6 capped at 10 s, one process per framework"
    )
    ap.add_argument("--only", metavar="W1,W3", help="workloads to run (default: all)")
    ap.add_argument(
        "--frameworks",
        metavar="NAMES",
        help="comma-separated names or prefixes (gradtape, torch, jax, ...) or globs; "
        "default: all. Known: " + ", ".join(f.name for f in FRAMEWORKS),
    )
    ap.add_argument("--out", metavar="FILE.md", help="also write the markdown report here")
    ap.add_argument("--json", metavar="FILE", help="write every raw figure here")
    ap.add_argument(
        "--isolate",
        choices=("cell", "framework"),
        help="a fresh process per (framework, workload) [default] or per framework "
        "[default with --quick]; W7 always gets its own",
    )
    ap.add_argument("--timeout", type=float, default=None, help="seconds per worker process (default 600, --quick 180)")
    ap.add_argument(
        "--compile-timeout",
        type=float,
        default=600.0,
        help="seconds per worker process of a compiled row (gt.function on JAX or with jit_compile, jax.jit, "
        "torch.compile), whose first call compiles: minutes for an unrolled 2,000-step chain (default 600)",
    )
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="the figure: median process CPU time (default; robust on a shared machine) or median wall time",
    )
    ap.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        default="cpu",
        help="where the arrays live: the CPU (default; JAX is kept off any GPU) or the first GPU (gradtape "
        "on torch:cuda, jax:gpu and cupy, torch on cuda, JAX on its GPU; implies --clock wall)",
    )
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile one call of each timed cell (not W6/W7) and append the top N "
        "functions by own time to the report",
    )
    ap.add_argument(
        "--tiny", action="store_true", help="shrink every workload (tests the harness; the numbers mean nothing)"
    )
    ap.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar over the (framework, workload) cells (the bar shows only when stderr is a terminal)",
    )
    args = ap.parse_args(argv)
    args.isolate = args.isolate or ("framework" if args.quick else "cell")
    args.timeout = args.timeout or (180.0 if args.quick else 600.0)
    if args.device == "gpu" and args.clock == "cpu":
        # the host's CPU time does not count the GPU's work: a GPU step is timed by the wall clock
        args.clock = "wall"
    frameworks = select_frameworks(args.frameworks)
    workloads = select_workloads(args.only)
    argv_s = "python benchmarks/run.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))

    bar = None  # the progress bar, once the cells are known; log lines print above it

    def log(msg):
        if bar is not None and not bar.disable:
            bar.write(msg, file=sys.stderr)
        else:
            print(msg, file=sys.stderr, flush=True)

    info = machine_info()
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    t0 = time.perf_counter()

    # the processes to start, workload-major so that a column is measured close together in time
    runnable = [f for f in frameworks if not missing(f)]
    for f in frameworks:
        if missing(f):
            log(f"  {f.name:<26} not installed (no module {missing(f)!r})")
    groups = []
    if args.isolate == "cell":
        for w in workloads:
            for f in runnable:
                if w in f.workloads:
                    groups.append((f, [w]))
    else:
        for f in runnable:
            ws = [w for w in workloads if w in f.workloads and w != "W7"]
            if ws and f.compiles:  # one long compile must not take the row's other cells with it
                groups += [(f, [w]) for w in ws]
            elif ws:
                groups.append((f, ws))
        for f in runnable:
            if "W7" in workloads and "W7" in f.workloads:
                groups.append((f, ["W7"]))
    results = []
    bar = tqdm(
        total=sum(len(ws) for _, ws in groups),
        desc="benchmarks",
        unit="cell",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=args.no_progress or not sys.stderr.isatty(),
    )
    for k, (f, ws) in enumerate(groups, 1):
        log(f"[{k}/{len(groups)}] {f.name} {','.join(ws)}")
        bar.set_postfix_str(f"{f.name} {','.join(ws)}")
        results += run_group(f, ws, args, log)
        bar.update(len(ws))
    bar.close()
    elapsed = time.perf_counter() - t0
    try:
        info["loadavg_end"] = os.getloadavg()
    except OSError:
        pass

    text, tg = report(results, frameworks, workloads, info, args, argv_s, elapsed)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "machine": info,
                    "command": argv_s,
                    "mode": "quick" if args.quick else "full",
                    "tiny": args.tiny,
                    "isolate": args.isolate,
                    "elapsed_s": elapsed,
                    "results": results,
                    "targets": tg,
                    "not_installed": {f.name: missing(f) for f in frameworks if missing(f)},
                },
                fh,
                indent=1,
            )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
