"""The ``gradtape`` command (also ``python -m gradtape``): ``conformance``, ``check``, ``audit`` and ``backends``.

A mistake on the command line (a function that cannot be found, a bad shape, a backend that is not
installed, ...) is one line on stderr that says what to do, and exit status 2; a check that finds a
disagreement exits with 1; a check that passes with 0.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import traceback

import gradtape as gt
from gradtape.core import config as _config
from gradtape.core import registry
from gradtape import backends as bk
from gradtape.conformance.report import run
from gradtape.conformance import audit_html
from gradtape.conformance.jax_compiles import quick_jax_compiles, reuse_mlir_contexts
from gradtape.testing import audit as _audit

__all__ = ["main"]

_GRADTAPE_DIR = os.path.dirname(os.path.abspath(gt.__file__))
_FUNCTION_FORMS = "MODULE:FUNCTION or path/to/file.py:FUNCTION (e.g. mymodule:loss or ./model.py:loss)"


class CLIError(Exception):
    """A mistake the user can fix: printed as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line that points to ``--help`` (not usage + error)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def _one_line(text):
    return " ".join(str(text).split())


def _csv(s):
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def _version():
    try:
        return importlib.metadata.version("gradtape")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return gt.__version__


# ---------------------------------------------------------------------------------------- conformance
def _op_names(text):
    """The ops of ``--ops`` (None: all); an unknown name is a CLIError naming the closest ones."""
    names = _csv(text)
    if names is None:
        return None
    known = sorted(op.name for op in registry.ops())
    for name in names:
        if name not in known:
            close = [k for k in known if k.endswith("." + name)]  # (linalg.cholesky for cholesky)
            close += [k for k in difflib.get_close_matches(name, known, n=3, cutoff=0.6) if k not in close]
            hint = f"did you mean {', '.join(close[:3])}? " if close else ""
            raise CLIError(f"no registered op named {name!r} in --ops: {hint}docs/ops.md lists every op")
    return names


def _output_path(option, path, endings, what=None):
    """An output file of ``option``, checked before the run: its ending (``what`` says which), and a
    folder that exists."""
    if path is None:
        return None
    if not str(path).lower().endswith(endings):
        raise CLIError(f"{option} {path!r}: give a file ending in {what or ' or '.join(endings)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{option} {path!r}: the folder {folder!r} does not exist; create it first")
    return path


def _report_path(path):
    """``--report``'s file, checked before the run: a known format, in a folder that exists."""
    return _output_path(
        "--report", path, (".json", ".md", ".html", ".htm"), ".json, .md or .html (the format follows the name)"
    )


def _conformance(args):
    backends = _backend_names(args.backends)
    ops = _op_names(args.ops)
    report_path = _report_path(args.report)
    report = run(
        backends=backends,
        ops=ops,
        dtype=args.dtype,
        native=args.native,
        samples=args.samples,
        order2=args.order == 2,
        progress=not args.no_progress,
        seed=args.seed,
        compiled=args.compiled,
    )
    if report_path:
        report.write(report_path)
        print(f"report written to {report_path}", file=sys.stderr)  # (the verdict stays the last line)
    print(report.markdown())
    return 1 if report.failed else 0


# ---------------------------------------------------------------------------------------- check
def _user_frame(e):
    """``file:line`` of the innermost frame outside gradtape (the user's code) in ``e``'s traceback
    or in those of the exceptions it was raised from, or ''."""
    where = ""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for frame in traceback.extract_tb(e.__traceback__):
            if not os.path.abspath(frame.filename).startswith(_GRADTAPE_DIR + os.sep):
                where = f"{frame.filename}:{frame.lineno}"
        e = e.__cause__ or e.__context__
    return where


def _split_spec(spec):
    """``"pkg.mod:fn"`` / ``"path/to/file.py:fn"`` -> (where, attribute path)."""
    where, sep, name = spec.rpartition(":")  # rpartition: a Windows drive letter keeps its colon
    if not sep or not where or not name:
        raise CLIError(f"{spec!r} does not name a function: give it as {_FUNCTION_FORMS}")
    if not all(part.isidentifier() for part in name.split(".")):
        raise CLIError(f"{name!r} in {spec!r} is not a Python name: give the function as {_FUNCTION_FORMS}")
    return where, name


def _is_path(where):
    return where.endswith(".py") or "/" in where or os.sep in where or os.path.isfile(where)


def _import_failed(what, e):
    if isinstance(e, SyntaxError):
        return CLIError(f"cannot import {what}: SyntaxError: {e.msg} ({e.filename}, line {e.lineno}); fix the file")
    if isinstance(e, ModuleNotFoundError):
        return CLIError(
            f"cannot import {what}: it needs the module {e.name!r}, which is not installed here; install it "
            f"(python3 -m pip install ...) and try again"
        )
    at = _user_frame(e)
    return CLIError(
        f"cannot import {what}: {type(e).__name__}: {_one_line(e)}{f' at {at}' if at else ''}; fix the module"
    )


def _on_path(folder):
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _load_file(path):
    if not path.endswith(".py"):
        raise CLIError(f"{path!r} is not a Python file: give the function as {_FUNCTION_FORMS}")
    if not os.path.isfile(path):
        raise CLIError(
            f"no file {path!r} (from {os.getcwd()}): check the path, or give the function as {_FUNCTION_FORMS}"
        )
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else f"_gradtape_check_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    _on_path(os.path.dirname(path))  # the file's own imports of its neighbours work
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise _import_failed(repr(path), e) from None
    return module


def _load_module(name):
    if not all(part.isidentifier() for part in name.split(".")):
        raise CLIError(f"{name!r} is not a module name: give the function as {_FUNCTION_FORMS}")
    _on_path(os.getcwd())  # as `python -m`: modules of the current directory first
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise CLIError(
                f"no module named {e.name!r} in the current directory ({os.getcwd()}) or on sys.path: run from "
                f"the folder that holds it, or give its file instead (path/to/{name.split('.')[-1]}.py:FUNCTION)"
            ) from None
        raise _import_failed(repr(name), e) from None
    except Exception as e:
        raise _import_failed(repr(name), e) from None


def _load_function(spec):
    """The callable named by ``spec`` (``module:func``, ``file.py:func``, ``./file.py:func``, ...)."""
    where, name = _split_spec(spec)
    module = _load_file(where) if _is_path(where) else _load_module(where)
    obj = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            defined = sorted(
                k
                for k, v in vars(module).items()
                if callable(v) and not k.startswith("_") and getattr(v, "__module__", None) == module.__name__
            )
            listing = f"; it defines: {', '.join(defined[:12])}" if defined else "; it defines no function"
            raise CLIError(f"{where!r} has no {name!r}{listing}") from None
    if not callable(obj):
        raise CLIError(f"{spec!r} is a {type(obj).__name__}, not a function: name a function")
    return obj


def _shape(s):
    text = s.strip().strip("()[]").strip()
    try:
        shape = tuple(int(v) for v in text.split(",") if v.strip()) if text else ()
    except ValueError:
        shape = None
    if shape is None or any(d < 0 for d in shape):
        raise CLIError(
            f"--shape {s!r} is not a shape: give sizes separated by commas, e.g. 3 or 2,3 (or () for a scalar)"
        )
    return shape


def _input_shapes(fn, spec, given):
    """One shape per input of ``fn``: those given (their number checked against ``fn``'s
    parameters), or a scalar per required parameter."""
    shapes = [_shape(s) for s in given] if given else None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature (a builtin): take the shapes as given
        return shapes or [()]
    spec = f"{getattr(fn, '__name__', spec)}{inspect.signature(fn)}"
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is P.empty]
    varargs = any(p.kind is P.VAR_POSITIONAL for p in params)
    kwonly = [p.name for p in params if p.kind is P.KEYWORD_ONLY and p.default is P.empty]
    if kwonly:
        raise CLIError(
            f"{spec} has keyword-only parameter(s) without a default ({', '.join(kwonly)}); gradtape check passes "
            "its inputs by position: give them defaults or check a wrapper that takes arrays only"
        )
    if shapes is None:
        if not positional and not varargs:
            raise CLIError(f"{spec} takes no inputs, so it has no gradient to check: check a function of arrays")
        return [()] * max(len(required), 1)
    lo, hi = len(required), (None if varargs else len(positional))
    if len(shapes) < lo or (hi is not None and len(shapes) > hi):
        takes = f"{lo}" if lo == hi else (f"{lo} or more" if hi is None else f"{lo} to {hi}")
        example = " ".join(["--shape 3"] * max(lo, 1))
        raise CLIError(
            f"{spec} takes {takes} input(s), but {len(shapes)} --shape {'was' if len(shapes) == 1 else 'were'} "
            f"given: give one --shape per input, e.g. {example} (or no --shape for scalars)"
        )
    return shapes


def _backend_names(text):
    """The backends of ``--backends`` (None: every installed one); a name that is unknown or not
    installed is a CLIError saying what exists and how to install it."""
    names = _csv(text)
    if names is None:
        return None
    installed = gt.available_backends()
    for name in names:
        if name in installed:
            continue
        if name not in bk.known_backends():
            try:
                bk.get(name)  # an alias ("np", "pytorch", "strict") or one registered by hand
                continue
            except ValueError:
                raise CLIError(
                    f"unknown backend {name!r} in --backends: the known ones are {', '.join(bk.known_backends())} "
                    f"(installed here: {', '.join(installed)})"
                ) from None
            except ImportError:
                pass
        cmd = _config.install_command(name)
        how = f"install it with `{cmd}`" if cmd else "install the package that provides it"
        raise CLIError(
            f"backend {name!r} is not installed here: {how}, or leave it out of --backends "
            f"(installed: {', '.join(installed)})"
        )
    return names


def _check(args):
    import numpy as np

    fn = _load_function(args.function)
    label = args.function
    shapes = _input_shapes(fn, label, args.shape)
    backends = _backend_names(args.backends)
    if not args.low < args.high:
        raise CLIError(f"--low {args.low:g} must be below --high {args.high:g}: the inputs are drawn from [low, high]")
    rng = np.random.default_rng(args.seed)
    inputs = [rng.uniform(args.low, args.high, size=s).astype(args.dtype) for s in shapes]
    progress = not args.no_progress and sys.stderr.isatty()
    try:
        report = gt.check_gradients(fn, *inputs, backends=backends, native=args.native, progress=progress)
    except Exception as e:
        if args.traceback:
            raise
        at = _user_frame(e)
        raise CLIError(
            f"{label} raised {type(e).__name__}: {_one_line(e)}{f' (at {at})' if at else ''}; fix the function "
            "(--traceback shows the whole traceback)"
        ) from None
    if report.skipped.get("tensorflow", "").startswith("not installed"):
        # TensorFlow is an optional extra reference (--native's help says so): not a skip to report on
        # every run, nor a package to suggest to everyone
        del report.skipped["tensorflow"]
    if not report.compared:
        # every gradtape backend was skipped: the reason, once, as a mistake (not a disagreement)
        reasons = {why for name, why in report.skipped.items() if name.startswith("gradtape:")}
        if len(reasons) == 1:
            raise CLIError(f"{label}: nothing was compared: {_one_line(reasons.pop())}")
    print(report)
    return 0 if report.passed else 1


# ---------------------------------------------------------------------------------------- audit
def _audit_modules(names):
    """The modules to audit, each importable (SciPy's array-API dispatch set up first)."""
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise CLIError(f"{name!r} is not a module name: give modules such as scipy.special or sklearn.metrics")
        try:
            _audit.prepare(name)
        except RuntimeError as e:
            raise CLIError(_one_line(e)) from None
        _load_module(name)
    return names


def _run_audit(args):
    modules = _audit_modules(args.modules)
    backends = _backend_names(args.backends)
    html_path = _output_path("--html", args.html, (".html", ".htm"))
    json_path = _output_path("--json", args.json, (".json",))
    md_path = _output_path("--markdown", args.markdown, (".md",))
    show = not args.no_progress and sys.stderr.isatty()

    def progress(name):
        print(f"\r\033[Kauditing {name}", end="", file=sys.stderr, flush=True)

    try:
        report = _audit.audit(
            modules,
            backends,
            native=args.native,
            time_limit=args.time_limit,
            names=_csv(args.functions),
            progress=progress if show else None,
        )
    except ValueError as e:  # a --functions name that no module has
        raise CLIError(_one_line(e)) from None
    if show:
        print("\r\033[K", end="", file=sys.stderr)
    for path, write in (
        (html_path, lambda p: audit_html.write(report, p)),
        (json_path, report.write_json),
        (md_path, report.write_markdown),
    ):
        if path:
            write(path)
            print(f"report written to {path}", file=sys.stderr)
    print(report.markdown())
    counts = report.counts()
    # (a wrong gradient or a NaN is a silent wrong number a user would get: it fails the command, as a
    # failed `gradtape check`; errors, lost gradients and functions not driven are reported, not failed)
    return 1 if counts["wrong"] or counts["nan"] else 0


# ---------------------------------------------------------------------------------------- backends
#: the distributions that provide a backend's library, where they are not named as the backend
_DISTRIBUTIONS = {
    "array_api_strict": ("array-api-strict",),
    "cupy": ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"),
}


def _library_version(name):
    for dist in _DISTRIBUTIONS.get(name, (name,)):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def _backends(args):
    print("| backend | installed | version | devices | to install |")
    print("|---|---|---|---|---|")
    avail = set(gt.available_backends())
    missing = []
    for name in bk.known_backends():
        devices, version, install = "", "", "—"
        if name in avail:
            version = _library_version(name)
            try:
                devices = ", ".join(bk.get(name).devices())
            except Exception as e:  # a broken install is reported in its row, not fatal
                devices = f"error: {type(e).__name__}: {_one_line(e)}"
        else:
            cmd = _config.install_command(name)
            install = f"`{cmd}`" if cmd else "install the package that provides this plugin"
            missing.append(name)
        print(f"| {name} | {'yes' if name in avail else 'no'} | {version} | {devices} | {install} |")
    if missing:
        print(f"\n{len(missing)} backend(s) not installed: {', '.join(missing)} (the last column says how to add one)")
    return 0


# ---------------------------------------------------------------------------------------- main
def _parser():
    parser = _Parser(
        prog="gradtape",
        description="gradtape: TensorFlow's GradientTape on any Array API library",
        epilog="examples:\n"
        "  gradtape conformance --backends numpy,torch\n"
        "  gradtape check ./model.py:loss --shape 3 --shape 3\n"
        "  gradtape audit scipy.special sklearn.metrics --html audit.html\n"
        "  gradtape backends",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{conformance,check,audit,backends}")

    c = sub.add_parser(
        "conformance",
        help="check every registered op's gradient on every backend",
        description="Check every registered op's gradient on every installed backend against finite differences "
        "and the libraries' own autodiff; prints the op x backend table.",
    )
    c.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    c.add_argument("--ops", help="comma-separated op names (default: every registered op)")
    c.add_argument("--dtype", default="float64", choices=["float64", "float32"], help="dtype of the cases")
    c.add_argument(
        "--native",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cross-check with torch.autograd / jax.grad, and TensorFlow where it is installed (default: on)",
    )
    c.add_argument("--samples", type=int, default=None, help="cases per op (default: all of its domain)")
    c.add_argument("--order", type=int, choices=[1, 2], default=2, help="2 also checks gradients of gradients")
    c.add_argument(
        "--compiled",
        action="store_true",
        help="also compute each case's gradient inside gt.function (traced, then replayed or compiled) and "
        "compare it with eager gradtape",
    )
    c.add_argument("--report", metavar="FILE", help="also write the report to FILE.json, FILE.md or FILE.html")
    c.add_argument("--seed", type=int, default=0, help="seed of the random cases (default: 0)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    c.set_defaults(run=_conformance)

    k = sub.add_parser(
        "check",
        help="cross-check the gradient of your function",
        description="Cross-check the gradient of sum(FUNCTION(inputs)) on every backend, against each library's "
        "own autodiff and finite differences, at random inputs. FUNCTION is written against the Array API: "
        "xp = x.__array_namespace__(), then xp.sum(x), xp.sin(x), ... Exit status: 0 when every pair agrees, "
        "1 when one disagrees, 2 for a mistake in the command.",
    )
    k.add_argument("function", help=f"the function to check, as {_FUNCTION_FORMS}")
    k.add_argument(
        "--shape",
        action="append",
        metavar="SHAPE",
        help="shape of one input, e.g. 3 or 2,3 or () for a scalar; repeat once per input, in order "
        "(default: a scalar per parameter)",
    )
    k.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    k.add_argument(
        "--native",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compare with torch.autograd / jax.grad, and TensorFlow where it is installed, on the same "
        "function (default: on)",
    )
    k.add_argument("--dtype", default="float64", choices=["float64", "float32"], help="dtype of the inputs")
    k.add_argument("--low", type=float, default=-1.0, help="inputs are drawn uniformly from [low, high] (default -1)")
    k.add_argument("--high", type=float, default=1.0, help="see --low (default 1)")
    k.add_argument("--seed", type=int, default=0, help="seed of the inputs (default: 0)")
    k.add_argument("--no-progress", action="store_true", help="no progress bar on stderr (shown on a terminal)")
    k.add_argument("--traceback", action="store_true", help="when the function raises, show Python's whole traceback")
    k.set_defaults(run=_check)

    a = sub.add_parser(
        "audit",
        help="audit which functions of a library differentiate correctly on gradtape",
        description="Call every public function of each MODULE (e.g. scipy.special, sklearn.metrics, einops) on "
        "gradtape tensors, on every backend, and report per function: correct gradient, gradient lost (where it "
        "left the tape), wrong gradient, NaN, not differentiable, error, or not driven (why). Inputs come from "
        "the signatures and docstrings, and a small table of overrides (gradtape/testing/audit.py). "
        "docs/audit.md says what each verdict means.",
    )
    a.add_argument("modules", nargs="+", metavar="MODULE", help="modules to audit, e.g. scipy.special")
    a.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    a.add_argument("--functions", help="comma-separated function names: audit only these")
    a.add_argument(
        "--native",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compare with torch.autograd / jax.grad of the library on torch / jax arrays (default: on)",
    )
    a.add_argument(
        "--time-limit",
        type=float,
        default=_audit.DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help=f"time limit of one call, in seconds (default: {_audit.DEFAULT_TIME_LIMIT:g})",
    )
    a.add_argument("--html", metavar="FILE", help="also write the report as a self-contained HTML page")
    a.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    a.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")
    a.add_argument("--no-progress", action="store_true", help="no progress line on stderr (shown on a terminal)")
    a.set_defaults(run=_run_audit)

    b = sub.add_parser(
        "backends",
        help="list the backends gradtape knows, their devices, and how to install the missing ones",
        description="List the backends gradtape knows: installed or not, the library's version, its devices, "
        "and the command that installs a missing one.",
    )
    b.set_defaults(run=_backends)
    return parser


def _check_environment():
    """A GRADTAPE_BACKEND that names no backend, or one not installed here, is one line up front (what
    is wrong, the valid names), not a run in which every computation fails on it."""
    try:
        gt.get_backend()
    except (ValueError, ImportError, RuntimeError) as e:
        raise CLIError(" ".join(str(e).split())) from None


def _quick_jax_compiles(args):
    """For a command that checks ops on JAX: XLA's quick compiles for this process (the command's own:
    gradtape never sets them in a user's), before JAX is imported, and one MLIR context per thread once
    it is (``gradtape.conformance.jax_compiles``: most of a check's time on JAX is compiling each op for
    each new shape)."""
    names = getattr(args, "backends", None)
    wanted = [n.strip() for n in names.split(",")] if names else gt.available_backends()
    if "jax" not in wanted or "jax" in sys.modules or importlib.util.find_spec("jax") is None:
        return
    quick_jax_compiles()
    importlib.import_module("jax._src.interpreters.mlir")
    reuse_mlir_contexts()


def main(argv=None):
    """Run the ``gradtape`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    try:
        if args.run is not _backends:  # (`gradtape backends` lists what is installed, whatever it says)
            _quick_jax_compiles(args)
            _check_environment()
        return args.run(args)
    except CLIError as e:
        print(f"gradtape {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
