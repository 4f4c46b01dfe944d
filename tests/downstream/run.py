"""Runs SciPy's and scikit-learn's **own** array-API tests with gradtape as one more namespace beside a
reference (array_api_strict; ``array_api_compat.torch`` with ``--backend torch``), in the same process
and the same tests, and prints the paired comparison (issue 21's "Keep it checked").

    python tests/downstream/run.py --suite scipy --backend numpy
    python tests/downstream/run.py --suite sklearn --backend torch --floatx float64 --out sk.md
    python tests/downstream/run.py --suite scipy --modules special,fft -k "not slow" --json out.json

Not part of the normal suite (no file here is named ``test_*.py``; ``tests/conftest.py`` also ignores
this folder): a full SciPy run takes tens of minutes on one core.  See docs/conformance.md, "SciPy's
and scikit-learn's own suites".
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: the SciPy subpackages whose tests take the ``xp`` fixture (issue 21's run)
SCIPY_MODULES = (
    "special stats fft signal linalg cluster integrate ndimage interpolate optimize differentiate _lib".split()
)
#: an ``xp``-less reference per gradtape backend: what the same tests are compared against
REFERENCE = {"numpy": "array_api_strict", "torch": "torch"}
OUTCOMES = ("passed", "failed", "skipped")


def _site_package(name):
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{name} is not installed in this Python ({sys.executable})")
    return Path(next(iter(spec.submodule_search_locations)))


def sklearn_test_files():
    """Every test module of the installed scikit-learn that is parametrized over array namespaces,
    and ``sklearn/tests/test_common.py`` (its estimator checks, ``check_array_api_input`` among them)."""
    root = _site_package("sklearn")
    files = sorted(
        p for p in root.rglob("tests/test_*.py") if "yield_namespace" in p.read_text(encoding="utf-8", errors="replace")
    )
    return [str(p) for p in [*files, root / "tests" / "test_common.py"]]


def pytest_args(args, only=None):
    if only:  # the modules of the node ids to rerun
        root = _site_package(args.suite).parent
        files = sorted({n.split("::")[0] for n in only})
        targets = [str(root / f) for f in files]
        return _pytest_cmd(args, ["-m", "array_api_backends"] if args.suite == "scipy" else []) + targets
    if args.suite == "scipy":
        modules = args.modules.split(",") if args.modules else SCIPY_MODULES
        targets = ["--pyargs", *(f"scipy.{m}" for m in modules)]
        extra = ["-m", "array_api_backends"]
    else:
        files = sklearn_test_files()
        if args.modules:
            wanted = args.modules.split(",")
            files = [f for f in files if any(w in f for w in wanted)]
        targets, extra = files, []
    return _pytest_cmd(args, extra) + targets


def _pytest_cmd(args, extra):
    cmd = [sys.executable, "-m", "pytest", "-p", "downstream_plugin", "-p", "no:cacheprovider", "-q", "--tb=no"]
    cmd += ["-o", "addopts=", "-W", "ignore::DeprecationWarning", *extra]
    if args.k:
        cmd += ["-k", args.k]
    return cmd + args.pytest_args


def compare(data):
    """Counts per namespace, and the tests that fail on gradtape but not on the reference: (node id, the
    error's first line, its next lines, the reference's outcome)."""
    ref = data["reference"]
    counts = {ns: collections.Counter() for ns in ("gradtape", ref)}
    by_key: dict[str, dict] = collections.defaultdict(dict)
    for nodeid, rec in data["tests"].items():
        outcome = {"xfailed": "skipped", "xpassed": "passed", None: "skipped"}.get(rec["outcome"], rec["outcome"])
        by_key[pair_key(nodeid, ref)][rec["namespace"]] = (nodeid, outcome, rec["error"], rec.get("detail", ""))
    # the reference is counted on the tests gradtape also ran (scikit-learn's mixed-namespace tests,
    # array_api_strict's input beside NumPy's, have no gradtape twin): ``unpaired`` counts the others
    counts["unpaired"] = collections.Counter()
    for v in by_key.values():
        if "gradtape" in v:
            counts["gradtape"][v["gradtape"][1]] += 1
        if ref in v:
            counts[ref if "gradtape" in v else "unpaired"][v[ref][1]] += 1
    only = sorted(
        (v["gradtape"][0], v["gradtape"][2], v["gradtape"][3], v[ref][1] if ref in v else "missing")
        for v in by_key.values()
        if "gradtape" in v and v["gradtape"][1] == "failed" and v.get(ref, (None, None))[1] != "failed"
    )
    return counts, only


def pair_key(nodeid, ref):
    """The node id with the namespace (and, for scikit-learn, its device) replaced by ``XP``: the same
    test on gradtape and on the reference share it."""
    name, _, params = nodeid.partition("[")
    params = re.sub(
        rf"(?<![A-Za-z0-9_.])(gradtape|{re.escape(ref)})(?![A-Za-z0-9_])([-,](device_name=)?(CPU_DEVICE|device1|cpu|None))?",
        "XP",
        params,
    )
    return f"{name}[{params}"


def markdown(meta, counts, only):
    ref = meta["reference"]
    lines = [
        f"## {meta['suite']} on gradtape ({meta['backend']}) vs {ref}",
        "",
        f"{meta['date']}; {meta['versions']}; GRADTAPE_BACKEND={meta['backend']}, "
        f"GRADTAPE_FLOATX={meta['floatx'] or '(unset)'}; {meta['seconds']:.0f} s"
        + ("; **partial: cut short by --timeout**" if meta.get("partial") else ""),
        "",
        "| namespace | passed | failed | skipped |",
        "|---|---|---|---|",
    ]
    for ns in ("gradtape", ref):
        lines.append(f"| {ns} | " + " | ".join(str(counts[ns][o]) for o in OUTCOMES) + " |")
    if counts["unpaired"]:
        lines += ["", f"({sum(counts['unpaired'].values())} tests of {ref} with no gradtape twin left out)"]
    skipped = [o for o in only if o[3] != "passed"]
    lines += [
        "",
        f"**{len(only)} fail on gradtape only**: {len(only) - len(skipped)} that {ref} passes, "
        f"{len(skipped)} that SciPy's/scikit-learn's markers skip on {ref} (by its name) and not on gradtape",
        "",
    ]
    lines += [f"- `{nodeid}`: {err}" + ("" if r == "passed" else f" ({ref}: {r})") for nodeid, err, _, r in only]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--suite", choices=("scipy", "sklearn"), required=True)
    p.add_argument("--backend", choices=tuple(REFERENCE), default="numpy", help="GRADTAPE_BACKEND (default numpy)")
    p.add_argument("--floatx", default=None, help="GRADTAPE_FLOATX for the run (float64 as SciPy runs torch)")
    p.add_argument("--modules", default=None, help="comma-separated: SciPy subpackages, or parts of sklearn paths")
    p.add_argument("-k", default=None, help="pytest's -k expression")
    p.add_argument("--json", default=None, help="write every test's outcome and the comparison here")
    p.add_argument("--out", default=None, help="write the markdown comparison here")
    p.add_argument("--only", default=None, help="rerun only these tests: a --json file (its gradtape-only failures)")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
    p.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = p.parse_args(argv)

    env = dict(os.environ)
    env["SCIPY_ARRAY_API"] = "1"
    env["GRADTAPE_BACKEND"] = args.backend
    if args.floatx:
        env["GRADTAPE_FLOATX"] = args.floatx
    env["GRADTAPE_DOWNSTREAM_SUITE"] = args.suite
    env["GRADTAPE_DOWNSTREAM_REF"] = REFERENCE[args.backend]
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parents[1]), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        env["GRADTAPE_DOWNSTREAM_OUT"] = out = os.path.join(tmp, "outcomes.json")
        ini = os.path.join(tmp, "pytest.ini")
        Path(ini).write_text("[pytest]\n")
        only = None
        if args.only:
            only = [n for n, *_ in json.loads(Path(args.only).read_text())["gradtape_only"]]
            env["GRADTAPE_DOWNSTREAM_ONLY"] = os.path.join(tmp, "only.txt")
            Path(env["GRADTAPE_DOWNSTREAM_ONLY"]).write_text("\n".join(only) + "\n")
        cmd = pytest_args(args, only)
        # node ids relative to site-packages (scipy/fft/tests/...); pyproject's settings left out
        cmd[3:3] = ["-c", ini, "--rootdir", str(_site_package(args.suite).parent)]
        print("running:", " ".join(cmd), flush=True)
        start = datetime.datetime.now(datetime.timezone.utc)
        try:
            returncode = subprocess.run(cmd, env=env, cwd=tmp, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            returncode = None  # the outcomes written so far (every 200 tests) are reported, marked partial
        seconds = (datetime.datetime.now(datetime.timezone.utc) - start).total_seconds()
        if not os.path.exists(out):
            sys.exit(f"pytest exited {returncode} without writing outcomes")
        data = json.loads(Path(out).read_text())
    versions = subprocess.run(
        [
            sys.executable,
            "-c",
            "import scipy, sklearn, numpy; print(f'SciPy {scipy.__version__}, "
            "scikit-learn {sklearn.__version__}, NumPy {numpy.__version__}')",
        ],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    meta = {
        "suite": args.suite,
        "backend": args.backend,
        "floatx": args.floatx,
        "reference": data["reference"],
        "date": start.strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions,
        "seconds": seconds,
        "partial": data["exitstatus"] is None,
    }
    counts, only = compare(data)
    text = markdown(meta, counts, only)
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        result = {**meta, "counts": {ns: dict(c) for ns, c in counts.items()}, "gradtape_only": only, **data}
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
