"""``python -m reports.trend``, the command the docs and CI recipes name: reports/store/trend.py."""

import sys

from reports.store.trend import main

if __name__ == "__main__":
    sys.exit(main())
