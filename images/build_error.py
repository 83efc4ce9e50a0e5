"""The error every image builder raises (the embedded guest, the static fio, the test image)."""

from __future__ import annotations


class ImageBuildError(RuntimeError):
    """A guest image (or the static fio) could not be built; the message says which step and how to fix it."""
