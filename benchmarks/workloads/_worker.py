"""One fresh process: ``python benchmarks/workloads/_worker.py --framework F --workloads W1,W2``.

Run by ``benchmarks/run.py`` with one-thread environment variables already set; prints one line
``@@BENCH {json}`` per workload.  Timing: the first call (trace, compile, caches: kept apart as
``first_call_s``, the second as ``second_call_s``) and the remaining warm-up calls are not
counted; then ``reps`` timed calls, each after a ``gc.collect()``, their number chosen so the timed
part lasts about the plan's budget (wall time), within [min, max]; the figure is their median, of
the process's CPU time by default (``--clock cpu``: robust on a shared machine, and equal to the
wall time of an idle one for one-threaded work) or of wall time (``--clock wall``); both are kept.
W6 is first projected and skipped when one run would exceed the plan's cap.  W7 measures memory
(see ``measure_memory``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[0] = os.path.dirname(HERE)  # benchmarks/, so ``workloads`` is a package

from workloads import BY_NAME, load  # noqa: E402
from workloads.common import SIZES, NotApplicable, Unavailable  # noqa: E402

#: per mode and workload: warm-up calls, seconds of timed calls to aim for, [min, max] repeats
PLANS = {
    "full": {
        "W1": dict(warmup=2, budget=2.5, min=3, max=21),
        "W2": dict(warmup=2, budget=2.5, min=3, max=21),
        "W3": dict(warmup=3, budget=2.5, min=5, max=51),
        "W4": dict(warmup=2, budget=4.0, min=3, max=7),
        "W5": dict(warmup=2, budget=2.5, min=5, max=51),
        "W6": dict(warmup=0, budget=20.0, min=1, max=3, cap=60.0),
        "W7": dict(warmup=2, measure=3),
    },
    "quick": {
        "W1": dict(warmup=1, budget=0.3, min=1, max=3),
        "W2": dict(warmup=1, budget=0.3, min=1, max=3),
        "W3": dict(warmup=2, budget=0.5, min=1, max=9),
        "W4": dict(warmup=2, budget=0.5, min=1, max=2),
        "W5": dict(warmup=2, budget=0.5, min=1, max=9),
        "W6": dict(warmup=0, budget=1.0, min=1, max=1, cap=5.0),
        "W7": dict(warmup=2, measure=1),
    },
}
PROBE_OPS = 2000


def _timed(case, both=False):
    """One call: its wall time (and, with ``both``, its process CPU time), and its result."""
    gc.collect()
    c0 = time.process_time()
    t0 = time.perf_counter()
    r = case.step()
    case.sync(r)
    t = time.perf_counter() - t0
    if both:
        return t, time.process_time() - c0, r
    return t, r


def time_case(case, plan, clock="cpu"):
    """Warm up, then time repeats.  ``median_s`` is the median over the repeats of ``clock``:
    process CPU time (``cpu``, all threads of this process: what the work costs, whatever else
    the machine runs) or wall time (``wall``); both are kept."""
    first, first_cpu, r = _timed(case, both=True)
    checksum = case.checksum(r) if case.checksum else None
    del r
    walls, cpus = [], []
    warm = 1
    second = None
    if plan["warmup"] == 0:  # W6: the probe warmed up; the first call counts
        walls.append(first)
        cpus.append(first_cpu)
        warm = 0
    else:
        # the plan's warm-up calls, and more while the calls still get much faster (JAX compiles
        # per primitive and shape over the first calls)
        last, prev = first, None
        while warm < plan["warmup"] or (prev is not None and warm < plan["warmup"] + 8 and prev > 1.5 * last):
            prev = last
            last, r = _timed(case)
            del r
            if warm == 1:
                second = last
            warm += 1
    est = first if plan["warmup"] == 0 else last
    reps = max(plan["min"], min(plan["max"], math.ceil(plan["budget"] / max(est, 1e-9))))
    while len(walls) < reps:
        t, c, r = _timed(case, both=True)
        del r
        walls.append(t)
        cpus.append(c)
    times = cpus if clock == "cpu" else walls
    return {
        "clock": clock,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "median_wall_s": statistics.median(walls),
        "median_cpu_s": statistics.median(cpus),
        "wall_s_all": walls,
        "cpu_s_all": cpus,
        "cpu_over_wall": sum(cpus) / sum(walls),
        "reps": reps,
        "warmup": warm,
        "first_call_s": first,
        "first_call_cpu_s": first_cpu,
        "second_call_s": second,
        "ops": case.ops,
        "checksum": checksum,
    }


def run_w6(fw, mod, cfg, plan, per_op=None, clock="cpu"):
    """W6 after a projection of its time: from W1's per-op time when this process measured it,
    else from a 2,000-op probe of W6's own chain."""
    source = "W1 in this process"
    if per_op is None:
        probe_cfg = dict(cfg, override={"W6": dict(SIZES["tiny" if cfg.get("tiny") else "full"]["W6"], ops=PROBE_OPS)})
        probe = mod.setup(fw.name, "W6", probe_cfg)
        _, r = _timed(probe)
        del r
        t_probe, r = _timed(probe)
        del r, probe
        per_op = t_probe / PROBE_OPS
        source = f"a {PROBE_OPS}-op probe"
    case = mod.setup(fw.name, "W6", cfg)
    projected = per_op * case.ops
    if projected > plan["cap"]:
        return {
            "status": "skipped",
            "projected_s": projected,
            "reason": f"projected {projected:.0f} s per run (from {source}) exceeds the "
            f"{plan['cap']:.0f} s cap of this mode",
        }
    # a cheap run gets a warm-up call (a jitted chain compiles on its first call); an expensive
    # one counts its first call
    res = time_case(case, dict(plan, warmup=1 if projected <= 2.0 else 0), clock)
    res["projected_s"] = projected
    return res


# ---------------------------------------------------------------------------------------- memory
def _proc_status():
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:", "Threads:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def _rss_kib():
    s = _proc_status()
    if "VmRSS" in s:
        return s["VmRSS"]
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak():
    """Reset the kernel's high-water mark of this process (Linux >= 4.0); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_kib():
    s = _proc_status()
    if "VmHWM" in s:
        return s["VmHWM"]
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


MIB = 1024.0


def measure_memory(case, plan, use_tracemalloc):
    """Peak and held memory of one step, after warm-up, in MiB over the baseline just before it.

    RSS (every framework): reset VmHWM, read VmRSS (baseline), run one step, read VmHWM (peak);
    drop the step's result but keep what a caller would still hold (``case.keep``: the tape, or
    torch's loss) -> ``held_alive``; drop that too -> ``held``.  The parent sets
    ``MALLOC_MMAP_THRESHOLD_`` so that freed arrays go back to the OS and RSS follows live memory.
    tracemalloc (NumPy-based frameworks, whose array buffers it sees): the same on one more step,
    tracing from two warm-up steps before it.
    """
    for _ in range(plan["warmup"]):
        r = case.step()
        case.sync(r)
        del r
    gc.collect()
    method = "VmHWM reset" if _reset_peak() else "ru_maxrss (not resettable: lower bound)"
    runs = []
    for _ in range(plan["measure"]):
        gc.collect()
        _reset_peak()
        base = _rss_kib()
        base_peak = _peak_kib()
        r = case.step()
        case.sync(r)
        peak = _peak_kib()
        keep = case.keep(r)
        del r
        gc.collect()
        held_alive = _rss_kib()
        del keep
        gc.collect()
        held = _rss_kib()
        runs.append(
            {
                "peak": (peak - (base if method == "VmHWM reset" else base_peak)) / MIB,
                "held_alive": (held_alive - base) / MIB,
                "held": (held - base) / MIB,
            }
        )
    out = {
        "method": method,
        "peak_mib": statistics.median(x["peak"] for x in runs),
        "held_alive_mib": max(x["held_alive"] for x in runs),
        "held_mib": max(x["held"] for x in runs),
        "runs": runs,
    }
    if use_tracemalloc:
        # started before two more warm-up steps, so that arrays a step replaces (a Variable's
        # value after assign_sub) were allocated under tracing and their release is counted
        import tracemalloc

        tracemalloc.start()
        for _ in range(2):
            r = case.step()
            case.sync(r)
            del r
        gc.collect()
        cur0, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        r = case.step()
        case.sync(r)
        _, peak = tracemalloc.get_traced_memory()
        keep = case.keep(r)
        del r
        gc.collect()
        alive, _ = tracemalloc.get_traced_memory()
        del keep
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out.update(
            tm_peak_mib=(peak - cur0) / 2**20,
            tm_held_alive_mib=(alive - cur0) / 2**20,
            tm_held_mib=(held - cur0) / 2**20,
        )
    return out


def profile(mod, fw, workload, cfg, top):
    """cProfile of one call (after a warm-up call): the top functions by own time."""
    import cProfile
    import io
    import pstats

    case = mod.setup(fw.name, workload, cfg)
    case.sync(case.step())
    pr = cProfile.Profile()
    pr.enable()
    case.sync(case.step())
    pr.disable()
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    text = buf.getvalue()
    root = os.path.dirname(os.path.dirname(HERE))
    return text.replace(root + os.sep, "").replace(os.path.dirname(os.__file__) + os.sep, "")


# ---------------------------------------------------------------------------------------- main
def _threads_info():
    info = {"Threads": _proc_status().get("Threads")}
    try:
        from threadpoolctl import threadpool_info

        info["threadpools"] = [(p.get("internal_api"), p.get("num_threads")) for p in threadpool_info()]
    except Exception:
        pass
    if "torch" in sys.modules:
        import torch

        info["torch"] = torch.get_num_threads()
    return info


def _limit_threads(fw):
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except Exception:
        pass
    if "torch" in fw.needs:
        import torch

        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass


def emit(d):
    sys.stdout.write("@@BENCH " + json.dumps(d) + "\n")
    sys.stdout.flush()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after timing, cProfile one more call and report the top N functions",
    )
    a = ap.parse_args(argv)
    fw = BY_NAME[a.framework]
    cfg = {"quick": a.quick, "tiny": a.tiny, "device": a.device}
    plans = PLANS["quick" if a.quick else "full"]
    t_import = time.perf_counter()
    _limit_threads(fw)
    mod = load(fw)
    done = {}
    for w in a.workloads.split(","):
        rec = {"framework": fw.name, "workload": w}
        try:
            t0 = time.perf_counter()
            if w == "W6":
                w1 = done.get("W1")
                per_op = w1["median_wall_s"] / w1["ops"] if w1 and w1.get("status") == "ok" else None
                res = run_w6(fw, mod, cfg, plans[w], per_op, a.clock)
            else:
                case = mod.setup(fw.name, w, cfg)
                if w == "W7":
                    res = measure_memory(case, plans[w], fw.numpy_memory)
                else:
                    res = time_case(case, plans[w], a.clock)
                if case.info is not None:
                    res.update(case.info())
                if case.notes:
                    res["notes"] = list(case.notes)
                del case
            res.setdefault("status", "ok")
            res["wall_s"] = time.perf_counter() - t0
            rec.update(res)
        except NotApplicable as e:
            rec.update(status="n/a", reason=str(e))
        except Unavailable as e:
            rec.update(status="unavailable", reason=str(e)[:500])
        except Exception as e:
            rec.update(
                status="error", reason=f"{type(e).__name__}: {e}"[:500], traceback=traceback.format_exc()[-3000:]
            )
        gc.collect()
        rec["threads"] = _threads_info()
        done[w] = rec
        if a.profile and rec.get("status") == "ok" and w not in ("W6", "W7"):
            rec["profile"] = profile(mod, fw, w, cfg, a.profile)
        emit(rec)
    if fw.name.startswith("gradtape"):
        import gradtape

        emit({"meta": {"gradtape_file": gradtape.__file__}})
    emit({"meta": {"process_s": time.perf_counter() - t_import}})


if __name__ == "__main__":
    main()
