"""The ``gradtape`` command (issue 13, items 4, 5 and 8): ``check`` takes ``module:func`` and file paths,
runs without ``--shape``, and answers every mistake with one line on stderr that says what to do (exit
status 2, no traceback); ``--version``, ``python -m gradtape``, ``backends`` with install commands;
progress bars on a terminal (``check``, ``benchmarks/run.py``).

Most tests call :func:`gradtape.cli.main` in-process; those that need the real entry point (the
``gradtape`` console script, ``python -m gradtape``, a terminal for the progress bars) run it in a
subprocess.
"""

from __future__ import annotations

import argparse
import ast
import os
import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import gradtape as gt
from gradtape import cli
from gradtape.core import config as _config
from gradtape.core import backend_registry as bk
from gradtape.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USERFNS = textwrap.dedent(
    """\
    import gradtape as gt


    def f(x):
        xp = x.__array_namespace__()
        return xp.sin(x) * x


    def two(x, y):
        xp = x.__array_namespace__()
        return xp.sum(xp.tanh(x) * y)


    def optional(x, scale=2.0):
        return x * x * scale


    def varargs(*xs):
        return xs[0] * xs[-1]


    def kwonly(x, *, k):
        return x * k


    def nothing():
        return 1.0


    def uses_sum(x):
        return x.sum()


    def uses_transpose(x):
        return x.transpose()


    def raises(x):
        raise RuntimeError("bad input\\non two lines")


    @gt.custom_gradient
    def wrong_square(x):
        def grad(dy):
            return dy * 3.0 * x  # the derivative of x * x is 2 x: gradtape disagrees with the rest

        return x * x, grad


    CONSTANT = 3
    """
)


@pytest.fixture
def userdir(tmp_path, monkeypatch):
    """A folder with the user's functions (``userfns.py``, ``sub/deep.py``), the current directory;
    modules the CLI imports and folders it puts on ``sys.path`` are forgotten after the test."""
    (tmp_path / "userfns.py").write_text(USERFNS)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "neighbour.py").write_text("SCALE = 2.0\n")
    (tmp_path / "sub" / "deep.py").write_text(
        "import neighbour\n\n\ndef f(x):\n    xp = x.__array_namespace__()\n    return xp.exp(x) * neighbour.SCALE\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("userfns", "neighbour", "sub", "sub.deep", "deep"):  # (another test's modules of these names)
        monkeypatch.delitem(sys.modules, name, raising=False)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:  # the user's modules only (a library's cannot be imported twice)
        if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def one_line_error(capsys, argv):
    """Run ``gradtape argv``: it must exit with 2, print nothing on stdout, and one line on stderr."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------------------------- check: runs
def test_check_without_shape_takes_a_scalar_per_parameter(userdir, capsys, backend):
    assert main(["check", "userfns:two", "--backends", backend, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check_gradients: all pairs agree")
    rows = [line for line in out.splitlines() if line.startswith(f"| gradtape:{backend} | finite differences |")]
    assert [r.split("|")[3].strip() for r in rows] == ["0", "1"]  # both inputs were differentiated


@pytest.mark.parametrize(
    "spec",
    ["userfns:f", "userfns.py:f", "./userfns.py:f", "sub/deep.py:f", "ABS/sub/deep.py:f", "sub.deep:f"],
)
def test_check_accepts_modules_and_files(userdir, capsys, spec):
    spec = spec.replace("ABS", str(userdir))
    if spec == "sub.deep:f":  # a package-style module name: sub/ on the path of the current directory
        (userdir / "sub" / "__init__.py").write_text("")
        sys.path.insert(0, str(userdir / "sub"))  # for deep's own `import neighbour`
    assert main(["check", spec, "--shape", "2,3", "--backends", "numpy", "--no-native", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check_gradients: all pairs agree") and "| gradtape:numpy | finite differences | 0 |" in out


def test_check_does_not_push_tensorflow(userdir, capsys, backend):
    """TensorFlow is an optional reference: where it is not installed, `gradtape check` (native
    cross-checks on) neither lists it as skipped nor suggests installing it (issue 26)."""
    if importlib.util.find_spec("tensorflow") is not None:
        pytest.skip("tensorflow is installed here: it takes part in the check")
    assert main(["check", "userfns:f", "--shape", "3", "--backends", backend, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tensorflow" not in out and "skipped" not in out, out
    assert out.startswith("check_gradients: all pairs agree"), out


def test_check_optional_and_variadic_parameters(userdir, capsys):
    args = ["--backends", "numpy", "--no-native", "--no-progress"]
    assert main(["check", "userfns:optional", *args]) == 0  # one scalar for the one required parameter
    assert main(["check", "userfns:optional", "--shape", "3", "--shape", "3", *args]) == 0  # both given
    assert main(["check", "userfns:varargs", "--shape", "3", "--shape", "3", "--shape", "3", *args]) == 0
    out = capsys.readouterr().out
    assert out.count("all pairs agree") == 6  # (the verdict first and last of each)


def test_check_a_wrong_gradient_exits_with_1(userdir, capsys, backend):
    rc = main(["check", "userfns:wrong_square", "--shape", "3", "--backends", backend, "--no-native", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "pair(s) disagree" in out.splitlines()[0]
    assert re.search(rf"\| gradtape:{backend} \| finite differences \| 0 \| .* \*\*FAIL\*\* \|", out), out


def test_check_float32_inputs(userdir, capsys, backend):
    argv = ["check", "userfns:f", "--shape", "4", "--dtype", "float32", "--backends", backend, "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().out


# ---------------------------------------------------------------------------------------- check: mistakes
ERRORS = [
    (["userfns"], r"'userfns' does not name a function: give it as MODULE:FUNCTION or path/to/file.py:FUNCTION"),
    (["userfns:"], r"does not name a function"),
    (["userfns:2f"], r"'2f' in 'userfns:2f' is not a Python name"),
    (["nosuchmodule:f"], r"no module named 'nosuchmodule' in the current directory .* give its file instead"),
    (["userfns:g"], r"'userfns' has no 'g'; it defines: f, .*two"),
    (["userfns:CONSTANT"], r"'userfns:CONSTANT' is a int, not a function"),
    (["nofile.py:f"], r"no file 'nofile.py' \(from .*\): check the path"),
    (["sub/nofile.py:f"], r"no file 'sub/nofile.py'"),
    (["badsyntax.py:f"], r"cannot import '.*badsyntax.py': SyntaxError: .*line 1\); fix the file"),
    (["needsdep:f"], r"cannot import 'needsdep': it needs the module 'nosuchdependency', which is not installed"),
    (["raisesatimport:f"], r"cannot import 'raisesatimport': RuntimeError: at import .*raisesatimport.py:1; fix"),
    (["userfns:two", "--shape", "3"], r"two\(x, y\) takes 2 input\(s\), but 1 --shape was given: give one --shape"),
    (["userfns:f", "--shape", "3", "--shape", "3"], r"f\(x\) takes 1 input\(s\), but 2 --shape were given"),
    (
        ["userfns:optional", "--shape", "1", "--shape", "1", "--shape", "1"],
        r"optional\(x, scale=2.0\) takes 1 to 2 input\(s\)",
    ),
    (["userfns:kwonly"], r"kwonly\(x, \*, k\) has keyword-only parameter\(s\) without a default \(k\)"),
    (["userfns:nothing"], r"nothing\(\) takes no inputs, so it has no gradient to check"),
    (["userfns:f", "--shape", "2,x"], r"--shape '2,x' is not a shape: give sizes separated by commas"),
    (["userfns:f", "--shape", "-2"], r"--shape '-2' is not a shape"),
    (["userfns:f", "--backends", "nosuchlib"], r"unknown backend 'nosuchlib' in --backends: the known ones are numpy"),
    (["userfns:f", "--low", "1", "--high", "1"], r"--low 1 must be below --high 1"),
    (
        ["userfns:raises"],
        r"userfns:raises raised RuntimeError: bad input on two lines \(at .*userfns.py:\d+\); fix the function",
    ),
]


@pytest.mark.parametrize(("argv", "message"), ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_check_mistakes_are_one_line_with_exit_2(userdir, capsys, argv, message):
    (userdir / "badsyntax.py").write_text("def f(x:\n    return x\n")
    (userdir / "needsdep.py").write_text("import nosuchdependency\n\n\ndef f(x):\n    return x\n")
    (userdir / "raisesatimport.py").write_text("raise RuntimeError('at import')\n")
    line = one_line_error(capsys, ["check", *argv, "--no-progress"])
    assert line.startswith("gradtape check: "), line
    assert re.search(message, line), line


def test_check_a_backend_that_is_not_installed(userdir, capsys, monkeypatch):
    monkeypatch.setattr(bk, "available_backends", lambda: ["numpy"])
    line = one_line_error(capsys, ["check", "userfns:f", "--backends", "numpy,torch"])
    assert line == (
        "gradtape check: backend 'torch' is not installed here: install it with "
        "`python3 -m pip install torch==2.13.0`, or leave it out of --backends (installed: numpy)"
    )


@pytest.mark.parametrize(
    ("function", "fix"),
    [("uses_sum", "xp.sum(x)"), ("uses_transpose", "xp.permute_dims(x, axes) (or x.T / x.mT)")],
)
def test_check_names_the_namespace_function_for_an_array_method(userdir, capsys, function, fix):
    line = one_line_error(capsys, ["check", f"userfns:{function}", "--shape", "3", "--backends", "numpy"])
    method = fix.split("(")[0].split(".")[-1] if function == "uses_sum" else "transpose"
    assert f"the Array API standard's arrays have no .{method}() method" in line
    assert f"call the namespace function instead: {fix}, with xp = x.__array_namespace__()" in line
    assert re.search(r"\(at .*userfns.py:\d+\)", line), line


def test_check_traceback_option_shows_the_whole_traceback(userdir):
    with pytest.raises(RuntimeError, match="bad input"):
        main(["check", "userfns:raises", "--backends", "numpy", "--traceback", "--no-progress"])


def test_usage_errors_are_one_line(capsys):
    line = one_line_error(capsys, ["check"])
    assert line == "gradtape check: the following arguments are required: function (see `gradtape check --help`)"
    line = one_line_error(capsys, ["check", "userfns:f", "--dtype", "int8"])
    assert "invalid choice: 'int8'" in line and "--help" in line
    line = one_line_error(capsys, [])
    assert line.startswith("gradtape: the following arguments are required: {conformance,check,audit,backends}")


def _options(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {a}", h) for a, h in _options(sub))
        elif not isinstance(action, argparse._HelpAction):
            yield "/".join(action.option_strings) or action.dest, action.help


def test_every_option_has_help():
    options = list(_options(cli._parser()))
    assert len(options) > 20  # the walk reached the subcommands
    assert [name for name, text in options if not text or not text.strip()] == []
    assert ("--version", "print the version") in options


def test_report_option_names_every_format(capsys):
    assert main(["conformance", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "FILE.json, FILE.md or FILE.html" in help_text


# ---------------------------------------------------------------------------------------- progress
def test_check_shows_a_progress_bar_on_a_terminal(userdir, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    names = gt.available_backends()
    assert main(["check", "userfns:f", "--shape", "3", "--no-native"]) == 0
    err = capsys.readouterr().err
    steps = len(names) + 1  # one per backend, one for the finite differences
    assert re.search(rf"check_gradients: +\d+%.*\| {steps - 1}/{steps} ", err), err
    assert "finite differences" in err
    assert main(["check", "userfns:f", "--shape", "3", "--no-native", "--no-progress"]) == 0
    assert "check_gradients:" not in capsys.readouterr().err


def test_check_progress_is_off_when_stderr_is_not_a_terminal(userdir, capsys):
    assert main(["check", "userfns:f", "--shape", "3", "--no-native"]) == 0
    assert capsys.readouterr().err == ""


def run_in_terminal(cmd, cwd, timeout=300):
    """Run ``cmd`` with stderr on a pseudo-terminal (100 columns): (exit status, stdout, stderr)."""
    pty = pytest.importorskip("pty", reason="the progress bar shows on a terminal: needs pseudo-terminals (POSIX)")
    import fcntl
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    err = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                err += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read()
        proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out.decode(), err.decode(errors="replace")


def test_the_check_command_shows_progress_in_a_terminal(userdir):
    cmd = [sys.executable, "-m", "gradtape", "check", "userfns:f", "--shape", "3", "--backends", "numpy"]
    rc, out, err = run_in_terminal(cmd, cwd=userdir)
    assert rc == 0, err
    assert out.startswith("check_gradients: all pairs agree")
    assert re.search(r"check_gradients: +50%.*\| 1/2 ", err), err
    rc, out, err = run_in_terminal([*cmd, "--no-progress"], cwd=userdir)
    assert rc == 0 and "check_gradients:" not in err, err


def test_benchmarks_show_progress_in_a_terminal():
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--tiny", "--only", "W1,W6"]
    cmd += ["--frameworks", "gradtape-numpy"]
    rc, out, err = run_in_terminal(cmd, cwd=ROOT)
    assert rc == 0, err
    assert re.search(r"benchmarks: 100%.*\| 2/2 ", err), err  # a cell per (framework, workload)
    assert "[1/1] gradtape-numpy W1,W6" in err  # the log lines are kept, above the bar
    assert any(line.startswith("| `gradtape-numpy` |") for line in out.splitlines()), out
    rc, out2, err = run_in_terminal([*cmd, "--no-progress"], cwd=ROOT)
    assert rc == 0 and "benchmarks:" not in err and "[1/1] gradtape-numpy W1,W6" in err, err
    assert out2.splitlines()[0] == out.splitlines()[0]


# ---------------------------------------------------------------------------------------- version, backends
def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gradtape {gt.__version__}"


def _run(cmd, **kw):
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env, **kw)


def test_python_dash_m_gradtape_is_the_same_command(tmp_path):
    p = _run([sys.executable, "-m", "gradtape", "--version"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"gradtape {gt.__version__}"
    p = _run([sys.executable, "-m", "gradtape", "check", "nosuchmodule:f"], cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        f"gradtape check: no module named 'nosuchmodule' in the current directory ({tmp_path}) or on sys.path: "
        "run from the folder that holds it, or give its file instead (path/to/nosuchmodule.py:FUNCTION)"
    ]


def _console_script():
    here = os.path.join(os.path.dirname(sys.executable), "gradtape")
    return here if os.path.exists(here) else shutil.which("gradtape")


@pytest.mark.skipif(
    _console_script() is None, reason="the `gradtape` console script is not installed (pip install -e .)"
)
def test_the_console_script(tmp_path):
    (tmp_path / "model.py").write_text("def loss(x):\n    return x.mean()\n")
    p = _run([_console_script(), "--version"])
    assert p.returncode == 0 and p.stdout.strip() == f"gradtape {gt.__version__}", p.stderr
    p = _run([_console_script(), "check", "./model.py:loss", "--shape", "2", "--backends", "numpy"], cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "call the namespace function instead: xp.mean(x)" in p.stderr


def test_backends_table(capsys):
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "| backend | installed | version | devices | to install |"
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in lines[2:]
        if line.startswith("|")
    }
    assert set(rows) == set(bk.known_backends())
    for name in gt.available_backends():
        installed, version, devices, install = rows[name]
        assert installed == "yes" and install == "—"
        assert re.match(r"\d+\.\d+", version), (name, version)
        assert "cpu" in devices.split(", ")


def test_backends_table_says_how_to_install_the_missing_ones(capsys, monkeypatch):
    monkeypatch.setattr(bk, "available_backends", lambda: ["numpy"])
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "| torch | no |  |  | `python3 -m pip install torch==2.13.0` |" in out
    assert "| jax | no |  |  | `python3 -m pip install jax` |" in out
    assert "| array_api_strict | no |  |  | `python3 -m pip install array-api-strict` |" in out
    assert '| dask | no |  |  | `python3 -m pip install "dask[array]" distributed` |' in out
    assert "| cupy | no |  |  | `python3 -m pip install cupy-cuda12x` |" in out
    assert "5 backend(s) not installed: torch, jax, dask, cupy, array_api_strict" in out


BLOCKER = """
import importlib.abc, sys

class Blocker(importlib.abc.MetaPathFinder):  # torch and jax are not installed, as far as this process knows
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "jax", "jaxlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
from gradtape.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_backends_command_in_a_process_without_torch_and_jax():
    p = _run([sys.executable, "-c", BLOCKER, "backends"])
    assert p.returncode == 0, p.stderr
    assert "| torch | no |  |  | `python3 -m pip install torch==2.13.0` |" in p.stdout
    assert "| jax | no |  |  | `python3 -m pip install jax` |" in p.stdout
    assert re.search(r"\| numpy \| yes \| \d", p.stdout), p.stdout


def test_install_commands_are_the_readmes():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert _config.install_command("torch") in readme  # the CPU wheel, as the README's test command
    assert _config.install_command("jax") == "python3 -m pip install jax"
    assert _config.install_command("array_api_strict") == "python3 -m pip install array-api-strict"
    assert _config.install_command("a_plugin") is None


def _strings(path):
    """The string literals of a Python file (f-strings' literal parts included), with their lines."""
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_install_hint_pulls_an_extra():
    """``pip install gradtape[torch]`` resolves a different torch than the README's and ~20 CUDA
    packages on a CPU machine: no string of the package (a message, an install hint) names an extra."""
    offenders = []
    for folder in ("gradtape", "backends", "conformance"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(dirpath, name)
                for line, text in _strings(path):
                    if re.search(r"gradtape\[|pip install \{extra\}", text):
                        offenders.append(f"{os.path.relpath(path, ROOT)}:{line}: {text.strip()[:80]}")
    assert offenders == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ops", "no_such_op"], "no registered op named 'no_such_op' in --ops"),
        (["--ops", "cholesky"], "did you mean linalg.cholesky?"),
        (["--ops", "cumsum"], "cumulative_sum"),
        (["--backends", "tourch"], "unknown backend 'tourch' in --backends"),
        (["--ops", "sin", "--report", "/no/such/folder/out.html"], "does not exist; create it first"),
        (["--ops", "sin", "--report", "out.pdf"], "give a file ending in .json, .md or .html"),
    ],
)
def test_conformance_mistakes_are_one_line(capsys, argv, message):
    # checked before the run: one line, exit status 2, no traceback, nothing run
    line = one_line_error(capsys, ["conformance", *argv, "--no-progress"])
    assert line.startswith("gradtape conformance: ")
    assert message in line


def test_check_an_integer_output_is_a_mistake_not_a_pass(userdir, capsys, backend):
    # a count has no gradient: one line saying why, exit status 2 (it used to compare zeros and pass)
    (userdir / "counts.py").write_text(
        "def count(x):\n    xp = x.__array_namespace__()\n    return xp.sum(xp.abs(x) > 0.5)\n"
    )
    line = one_line_error(capsys, ["check", "counts.py:count", "--shape", "3", "--backends", backend, "--no-native"])
    assert "counts.py:count: nothing was compared" in line
    assert "returns int64 values, and gradients need a floating output" in line


@pytest.mark.parametrize("spec", ["nump", "torch:cpu9"])
def test_a_bad_gradtape_backend_is_one_line_up_front(spec):
    """A GRADTAPE_BACKEND that names no backend (or no device of it) stops the command at once with one
    line naming the valid ones, not a traceback or a run whose every computation fails (issue 26)."""
    env = {**os.environ, "GRADTAPE_BACKEND": spec}
    for args in (["conformance", "--ops", "sin"], ["check", "math:sin", "--shape", "3"]):
        proc = subprocess.run(
            [sys.executable, "-m", "gradtape", *args], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert proc.returncode == 2 and proc.stdout == "", (proc.stdout[-2000:], proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"gradtape {args[0]}: GRADTAPE_BACKEND={spec!r}: "), lines
        assert ("installed here: numpy" if spec == "nump" else "devices: ['cpu']") in lines[0], lines
        assert "To fix" in lines[0], lines
    # `gradtape backends` lists what is installed, whatever the variable says
    proc = subprocess.run(
        [sys.executable, "-m", "gradtape", "backends"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and "| numpy | yes |" in proc.stdout, proc.stderr
