"""A zoo file that ends the process that imports it (as a script guarded by nothing would)."""

import sys

sys.exit(3)
