"""``python -m reports.compare``, the command the docs and CI recipes name: reports/store/compare.py."""

import sys

from reports.store.compare import main

if __name__ == "__main__":
    sys.exit(main())
