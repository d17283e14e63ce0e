"""`python -m tideflow ...` runs the `tideflow` command line."""

import sys

from .cli import main

sys.exit(main())
