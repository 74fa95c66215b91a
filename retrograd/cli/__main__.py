"""`python -m retrograd.cli` runs the `retrograd` command."""

import sys

from retrograd.cli import main

sys.exit(main())
