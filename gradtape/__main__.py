"""``python -m gradtape`` = the ``gradtape`` command."""

import sys

from gradtape.cli import main

sys.exit(main())
