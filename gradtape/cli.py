"""The ``gradtape`` command: ``conformance``, ``check`` and ``backends``."""

from __future__ import annotations

import argparse
import importlib
import sys
from gradtape.conformance.report import run
import gradtape as gt
from gradtape import backends as bk

__all__ = ["main"]


def _csv(s):
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def _shape(s):
    s = s.strip().strip("()")
    return tuple(int(v) for v in s.split(",") if v.strip()) if s else ()


def _conformance(args):
    report = run(
        backends=_csv(args.backends),
        ops=_csv(args.ops),
        dtype=args.dtype,
        native=args.native,
        samples=args.samples,
        order2=args.order == 2,
        progress=not args.no_progress,
        seed=args.seed,
        compiled=args.compiled,
    )
    print(report.markdown())
    if args.report:
        report.write(args.report)
        print(f"\nreport written to {args.report}")
    return 1 if report.failed else 0


def _check(args):
    import numpy as np

    module, _, name = args.function.partition(":")
    if not name:
        print("gradtape check: give the function as MODULE:FUNCTION", file=sys.stderr)
        return 2
    sys.path.insert(0, ".")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        print(f"gradtape check: cannot load {args.function!r}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    shapes = args.shape or ["()"]  # one scalar input
    inputs = [rng.uniform(args.low, args.high, size=_shape(s)).astype(args.dtype) for s in shapes]
    report = gt.check_gradients(fn, *inputs, backends=_csv(args.backends), native=args.native)
    print(report)
    return 0 if report.passed else 1


def _backends(args):
    print("| backend | installed | devices |")
    print("|---|---|---|")
    avail = set(gt.available_backends())
    for name in bk.known_backends():
        devices = ""
        if name in avail:
            try:
                devices = ", ".join(bk.get(name).devices())
            except Exception as e:
                devices = f"error: {type(e).__name__}: {e}"
        print(f"| {name} | {'yes' if name in avail else 'no'} | {devices} |")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="gradtape", description="gradtape: TensorFlow's GradientTape on any Array API library"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("conformance", help="check every registered op's gradient on every backend")
    c.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    c.add_argument("--ops", help="comma-separated op names (default: every registered op)")
    c.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    c.add_argument(
        "--native",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cross-check with torch.autograd / jax.grad / TensorFlow (default: on)",
    )
    c.add_argument("--samples", type=int, default=None, help="cases per op (default: all of its domain)")
    c.add_argument("--order", type=int, choices=[1, 2], default=2, help="2 also checks gradients of gradients")
    c.add_argument(
        "--compiled",
        action="store_true",
        help="also compute each case's gradient inside gt.function (traced, then replayed or compiled) and "
        "compare it with eager gradtape",
    )
    c.add_argument("--report", help="write the report to FILE.json or FILE.md")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--no-progress", action="store_true")
    c.set_defaults(run=_conformance)

    k = sub.add_parser("check", help="cross-check the gradient of your function MODULE:FUNCTION")
    k.add_argument("function", help="the function to check, as MODULE:FUNCTION (MODULE importable from here)")
    k.add_argument(
        "--shape",
        action="append",
        help="shape of one input, e.g. 3 or 2,3 (repeat per input; default: one scalar input)",
    )
    k.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    k.add_argument(
        "--native",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compare with torch.autograd / jax.grad of the same function (default: on)",
    )
    k.add_argument("--dtype", default="float64", choices=["float64", "float32"], help="dtype of the inputs")
    k.add_argument("--low", type=float, default=-1.0, help="inputs are drawn uniformly from [low, high]")
    k.add_argument("--high", type=float, default=1.0, help="see --low")
    k.add_argument("--seed", type=int, default=0, help="seed of the inputs")
    k.set_defaults(run=_check)

    b = sub.add_parser("backends", help="list the backends gradtape knows and their devices")
    b.set_defaults(run=_backends)

    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
