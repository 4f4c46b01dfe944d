"""Run the Array API standard's own test suite (data-apis/array-api-tests) on gradtape.

    git clone https://github.com/data-apis/array-api-tests && cd array-api-tests
    git checkout 55fcc60 && git submodule update --init      # the suite and spec this was measured at
    pip install -r requirements.txt
    python -m gradtape.conformance.array_api_tests . --max-examples 100 --report result.md

runs ``pytest array_api_tests`` in the suite's folder with ``ARRAY_API_TESTS_MODULE=gradtape`` and
``ARRAY_API_TESTS_VERSION`` set to ``--version`` (default 2025.12, the version gradtape reports;
2024.12 measures the previous standard) on one gradtape backend (``--backend``, default numpy), reads
the JUnit XML pytest writes, and prints the pass rate and every failure, each marked as a known quirk
of the suite (``known_failures/array-api-tests.txt``: failures the reference implementation
array_api_strict has too) or as new.  Exits 1 when a failure is not a known quirk.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

KNOWN = Path(__file__).with_name("known_failures") / "array-api-tests.txt"


def known_quirks(path=KNOWN):
    """``{test id: reason}`` from the known-quirks file (``id  # reason`` lines)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            tid, _, why = line.partition("  # ")
            out[tid.strip()] = why.strip()
    return out


def read_junit(path):
    """``(passed, failed, skipped)``: lists of test ids (``file::name``) from pytest's JUnit XML."""
    passed, failed, skipped = [], [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        cls = case.get("classname", "")
        parts = cls.split(".")
        # classname "array_api_tests.test_x" or "array_api_tests.test_x.TestClass"
        mod = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        tid = "/".join(parts[: mod + 1]) + ".py::" + "::".join(parts[mod + 1 :] + [case.get("name", "")])
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed.append(tid)
        elif "skipped" in tags:
            skipped.append(tid)
        else:
            passed.append(tid)
    return passed, failed, skipped


VERSION = "2025.12"


def pytest_configure(config):
    """As a pytest plugin (``--no-shrink``): the suite's hypothesis profile without the shrink phase.
    A failure stays a failure; only the minimisation of its example, which can take longer than the
    whole run on a backend with many failures, is skipped."""
    if os.environ.get("GRADTAPE_AAT_NO_SHRINK") != "1":
        return
    from hypothesis import Phase, settings

    settings.register_profile(
        "array-api-tests-no-shrink",
        parent=settings.get_profile("array-api-tests"),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    )
    settings.load_profile("array-api-tests-no-shrink")


pytest_configure.trylast = True  # type: ignore[attr-defined]


def run(suite, *, max_examples=100, backend="numpy", pytest_args=(), version=VERSION, shrink=True):
    """Run the suite; returns ``(passed, failed, skipped)`` test-id lists."""
    suite = Path(suite).resolve()
    if not (suite / "array_api_tests").is_dir():
        raise SystemExit(f"{suite} is not a checkout of data-apis/array-api-tests (no array_api_tests/ folder)")
    env = dict(os.environ, ARRAY_API_TESTS_MODULE="gradtape", ARRAY_API_TESTS_VERSION=version, GRADTAPE_BACKEND=backend)
    if not shrink:
        env["GRADTAPE_AAT_NO_SHRINK"] = "1"
        pytest_args = ["-p", "gradtape.conformance.array_api_tests", *pytest_args]
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "array_api_tests",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--max-examples={max_examples}",
            f"--junitxml={xml}",
            *pytest_args,
        ]
        subprocess.run(cmd, cwd=suite, env=env, check=False)
        if not xml.exists():
            raise SystemExit("pytest wrote no results: the suite did not run (see its output above)")
        return read_junit(xml)


def summary(passed, failed, skipped, known, *, backend="numpy", max_examples=100, version=VERSION):
    """A markdown summary: the rate, then each failure marked known quirk / new."""
    ran = len(passed) + len(failed)
    rate = 100.0 * len(passed) / ran if ran else 0.0
    new = [t for t in failed if t not in known]
    lines = [
        f"array-api-tests on gradtape ({backend} backend, {version}, {max_examples} examples): "
        f"**{len(passed)} of {ran} passed ({rate:.1f}%)**, {len(skipped)} skipped; "
        f"{len(failed) - len(new)} known suite quirks, {len(new)} new failures",
        "",
    ]
    if failed:
        lines += ["| test | |", "|---|---|"]
        lines += [f"| `{t}` | {'known quirk: ' + known[t] if t in known else '**new**'} |" for t in sorted(failed)]
    return "\n".join(lines) + "\n", new


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m gradtape.conformance.array_api_tests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("suite", help="path of a data-apis/array-api-tests checkout (with its array-api submodule)")
    p.add_argument("--max-examples", type=int, default=100)
    p.add_argument("--backend", default="numpy")
    p.add_argument("--version", default=VERSION, help=f"ARRAY_API_TESTS_VERSION (default {VERSION})")
    p.add_argument("--report", help="also write the summary to this markdown file")
    p.add_argument(
        "--no-shrink",
        action="store_true",
        help="skip hypothesis's shrinking of failing examples (much faster where many fail)",
    )
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:  # everything after -- goes to pytest, wherever the suite path stands
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1 :]
    a = p.parse_args(argv)
    passed, failed, skipped = run(
        a.suite,
        max_examples=a.max_examples,
        backend=a.backend,
        pytest_args=[*a.pytest_args, *extra],
        version=a.version,
        shrink=not a.no_shrink,
    )
    text, new = summary(
        passed, failed, skipped, known_quirks(), backend=a.backend, max_examples=a.max_examples, version=a.version
    )
    print(text)
    if a.report:
        Path(a.report).write_text(text)
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
