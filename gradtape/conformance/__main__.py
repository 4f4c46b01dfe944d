"""``python -m gradtape.conformance`` = ``gradtape conformance``."""

import sys

from gradtape.cli import main

if __name__ == "__main__":  # (importing this module, as a docs build does, runs nothing)
    sys.exit(main(["conformance", *sys.argv[1:]]))
