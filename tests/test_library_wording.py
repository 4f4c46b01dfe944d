"""Error messages that SciPy's own tests match (issue 21, found by tests/downstream/run.py): NumPy's
wording where a library matches NumPy's, on every backend."""

from __future__ import annotations

import re

import pytest

import gradtape as gt


def test_axis_out_of_bounds_says_numpys_words(backend):
    # SciPy's stats tests: match='...axis 10 is out of bounds for array...|out of range'
    x = gt.asarray([1.0, 2.0, 3.0])
    pattern = "axis 10 is out of bounds for array"
    calls = [
        lambda: gt.moveaxis(x, 10, 0),
        lambda: gt.flip(x, axis=10),
        lambda: gt.sort(x, axis=10),
        lambda: gt.argsort(x, axis=10),
        lambda: gt.diff(x, axis=10),
        lambda: gt.fft.rfft(x, axis=10),
    ]
    for call in calls:
        with pytest.raises(IndexError, match=pattern):
            call()
    # with NumPy's prefixes, which SciPy's pattern '...axis 10 is out of bounds for array...' needs
    with pytest.raises(IndexError, match="^source: axis 10 is out of bounds for array of dimension 1$"):
        gt.moveaxis(x, 10, 0)
    with pytest.raises(IndexError, match="^destination: axis 10 is out of bounds for array of dimension 1$"):
        gt.moveaxis(x, 0, 10)


def test_broadcast_shapes_error_says_numpys_words(backend):
    # SciPy's optimize/stats tests: match='(not be broadcast|Attempting to broadcast ...)'
    with pytest.raises(ValueError, match="not be broadcast") as e:
        gt.broadcast_shapes((2,), (3,))
    assert "do not broadcast" in str(e.value)  # gradtape's own words stay first


def test_result_type_error_is_its_own_pattern(backend):
    # SciPy's test_xp_result_type_force_floating re-raises with match=str(error): the message must
    # match itself as a regular expression (no parentheses or other metacharacters)
    with pytest.raises(ValueError) as e:
        gt.result_type(1, 2, 1.0)
    msg = str(e.value)
    assert re.search(msg, msg), msg
    assert "at least one array or dtype is required" in msg


def test_unconvertible_input_says_unsupported(backend):
    # SciPy's ndimage tests: match="`cval` must include only numbers.|Unsupported|...|Value 'a duck'"
    with pytest.raises(TypeError, match="^Unsupported input type str: cannot convert 'a duck'"):
        gt.asarray("a duck")
    with pytest.raises(TypeError, match="^Unsupported input type object"):
        gt.asarray(object())
