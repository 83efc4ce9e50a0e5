"""A cloud-init NoCloud seed: an ISO 9660 volume labelled ``cidata`` with ``user-data`` and
``meta-data`` at its root, written with pycdlib (the library microsoft/lisa and avocado use
for the same seed). Joliet and Rock Ridge names keep the lower-case file names cloud-init
looks for; the guest attaches it as a read-only CD-ROM or disk and cloud-init finds it by label.
"""

from __future__ import annotations

import io
from pathlib import Path

import pycdlib

#: The volume label cloud-init's NoCloud datasource looks for.
SEED_LABEL = "cidata"


def write_seed(path: Path, user_data: str, meta_data: str) -> Path:
    """Write the seed ISO to ``path`` and return it."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=SEED_LABEL)
    try:
        for name, text in (("user-data", user_data), ("meta-data", meta_data)):
            data = text.encode()
            iso_name = "/" + name.replace("-", "").upper()[:8] + ".;1"
            iso.add_fp(io.BytesIO(data), len(data), iso_name, rr_name=name, joliet_path="/" + name)
        iso.write(str(path))
    finally:
        iso.close()
    return path


def read_seed(path: Path) -> dict[str, str]:
    """The files of a seed ISO by their Joliet names (for tests and diagnostics)."""
    iso = pycdlib.PyCdlib()
    iso.open(str(path))
    try:
        out: dict[str, str] = {}
        for name in ("user-data", "meta-data"):
            buf = io.BytesIO()
            iso.get_file_from_iso_fp(buf, joliet_path="/" + name)
            out[name] = buf.getvalue().decode()
        if iso.pvd is not None:
            out["label"] = iso.pvd.volume_identifier.decode().strip()
        return out
    finally:
        iso.close()
