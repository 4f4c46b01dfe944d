"""A pytest plugin for long runs that may be cut short (the GPU checks run under a time limit): each
failure's report is appended to the file named by ``GRADTAPE_FAILURE_LOG`` the moment it arrives
(under pytest-xdist, in the controller), so an interrupted run keeps its tracebacks.

Use: ``PYTHONPATH=.ci GRADTAPE_FAILURE_LOG=failures.txt python3 -m pytest -p failure_log ...``
"""

import os


def pytest_runtest_logreport(report):
    path = os.environ.get("GRADTAPE_FAILURE_LOG")
    if path and report.failed:
        with open(path, "a") as fh:
            fh.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
