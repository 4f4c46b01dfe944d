"""``python -m gradtape.conformance`` = ``gradtape conformance``."""

import sys

from gradtape.cli import main

sys.exit(main(["conformance", *sys.argv[1:]]))
