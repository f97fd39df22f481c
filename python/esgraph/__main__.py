"""`python3 -m esgraph`: see esgraph/cli.py."""
import sys

from .cli import main

sys.exit(main())
