"""The replay as one executable file: a zipapp of the ``replay`` and ``model`` packages (their
``.py`` files; both import only the standard library and each other), run by ``python3``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

#: The project's root: the packages the zipapp carries are its ``replay`` and ``model``.
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("replay", "model")
MAIN = "import sys\nfrom replay.main import main\nsys.exit(main())\n"


def write_replay(path: Path) -> Path:
    """Write the executable zipapp at ``path`` (a new file: never one that exists)."""
    with open(path, "xb") as f:
        f.write(b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("__main__.py", MAIN)
            for package in PACKAGES:
                for source in sorted((ROOT / package).rglob("*.py")):
                    z.write(source, str(source.relative_to(ROOT)))
    return path
