"""The downstream runner (``tests/downstream/run.py``, issue 21) pairs each SciPy/scikit-learn test on
gradtape with the same test on the reference namespace, and the normal suite never collects it.  The
runner itself is too slow for CI (docs/conformance.md, "SciPy's and scikit-learn's own suites")."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("downstream_run", ROOT / "tests" / "downstream" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def test_pair_key_scipy_ids():
    a = run.pair_key("scipy/fft/tests/test_fftlog.py::test_gh_21661[gradtape-128]", "array_api_strict")
    b = run.pair_key("scipy/fft/tests/test_fftlog.py::test_gh_21661[array_api_strict-128]", "array_api_strict")
    c = run.pair_key("scipy/fft/tests/test_fftlog.py::test_gh_21661[gradtape-129]", "array_api_strict")
    assert a == b != c
    # a name that merely contains the namespace's is not the namespace
    assert run.pair_key("m.py::t[torch_like-gradtape]", "torch") == "m.py::t[torch_like-XP]"


def test_pair_key_sklearn_ids_drop_the_device():
    ref = (
        "sklearn/tests/test_common.py::test_estimators[PCA()-"
        "check_array_api_input(array_namespace=torch,device_name=cpu,dtype_name=float32)]"
    )
    gt = ref.replace("array_namespace=torch", "array_namespace=gradtape")
    assert run.pair_key(ref, "torch") == run.pair_key(gt, "torch")
    strict = "sklearn/utils/tests/test_x.py::test_y[array_api_strict-device1-float32]"
    ours = "sklearn/utils/tests/test_x.py::test_y[gradtape-cpu-float32]"
    assert run.pair_key(strict, "array_api_strict") == run.pair_key(ours, "array_api_strict")


def test_compare_lists_only_failures_the_reference_does_not_share():
    tests = {
        "m.py::t[gradtape-1]": {"namespace": "gradtape", "outcome": "failed", "error": "E1"},
        "m.py::t[array_api_strict-1]": {"namespace": "array_api_strict", "outcome": "passed", "error": ""},
        "m.py::t[gradtape-2]": {"namespace": "gradtape", "outcome": "failed", "error": "E2"},
        "m.py::t[array_api_strict-2]": {"namespace": "array_api_strict", "outcome": "failed", "error": "E2"},
        "m.py::t[gradtape-3]": {"namespace": "gradtape", "outcome": "xfailed", "error": ""},
        "m.py::t[array_api_strict-3]": {"namespace": "array_api_strict", "outcome": "skipped", "error": ""},
        "m.py::mixed[array_api_strict-numpy]": {"namespace": "array_api_strict", "outcome": "passed", "error": ""},
    }
    counts, only = run.compare({"reference": "array_api_strict", "tests": tests})
    assert only == [("m.py::t[gradtape-1]", "E1", "", "passed")]
    assert dict(counts["gradtape"]) == {"failed": 2, "skipped": 1}
    assert dict(counts["array_api_strict"]) == {"passed": 1, "failed": 1, "skipped": 1}
    assert dict(counts["unpaired"]) == {"passed": 1}  # no gradtape twin: not in the reference's counts


def test_the_normal_suite_does_not_collect_the_runner():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/downstream"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 5, proc.stdout + proc.stderr  # 5: no tests collected
