"""``python -m reports.store``: the store's command (reports/store/commands.py)."""

import sys

from reports.store.commands import main

if __name__ == "__main__":
    sys.exit(main())
