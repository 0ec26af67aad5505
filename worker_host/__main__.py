"""`python -m worker_host` runs the CLI."""

import sys

from ._cli import main

sys.exit(main())
