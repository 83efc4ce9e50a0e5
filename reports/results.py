"""The run's results directory: its own, private, checked before any guest starts.

- Each run gets a directory no other run holds: ``results/<YYYYmmdd-HHMMSS>``, or ``-2``,
  ``-3``... after it when another run started in the same second (created with an exclusive
  ``mkdir``, so two runs can never pick the same one).
- An explicit ``--results-dir`` must be new or empty: earlier results are never overwritten.
- Directories are created with the results mode (default 0700) and files get the same
  without execute bits (0600): measured numbers and guest details are the user's business.
- Outputs are written atomically (temporary file, then rename): a full disk leaves the
  previous file or none, never a truncated one.
- Every file the suite writes is a new file or replaces a regular one: a path that is a device,
  a FIFO, a directory or a socket (``--junit-xml /dev/null``) is refused before any guest starts,
  and again at the rename (:func:`write_atomic`), so a device node is never replaced by a file.
  Two outputs of one run on one path (``--junit-xml`` on the store's file), an output on one of
  the run's input files, or on a file SQLite makes and deletes beside the store (its journal), are
  refused too.
- ``--results-mode`` never lets group or others write: anyone who can write a gate's result can
  change its verdict.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fnmatch
import os
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Directories private to the user running the suite; ``--results-mode`` widens it.
DEFAULT_DIR_MODE = 0o700
#: Where a run's reproducer bundles go in its results directory (fixtures/reproducer.py).
REPRODUCERS_DIR = "reproducers"
#: Where a run without ``--results-dir`` puts its results, relative to the working directory.
DEFAULT_PARENT = Path("results")


class ResultsDirError(Exception):
    """A results directory that cannot be used; the message says how to fix it."""


def file_mode(dir_mode: int) -> int:
    """The mode of files in a directory of ``dir_mode``: the same without execute bits (0700 -> 0600)."""
    return dir_mode & 0o666


#: Bits of a results mode that let someone other than the owner change a file: group and others' write.
UNSAFE_MODE_BITS = 0o022


def parse_mode(text: str) -> int:
    """An octal directory mode that keeps the owner's rwx and lets no one else write, e.g.
    ``0750``; ValueError otherwise."""
    try:
        mode = int(text, 8)
    except ValueError:
        raise ValueError(f"--results-mode takes an octal mode such as 0700 or 0755; got {text!r}") from None
    if not 0 <= mode <= 0o777 or mode & 0o700 != 0o700:
        raise ValueError(f"--results-mode {text} must be between 0700 and 0777 and keep the owner's rwx (0700), "
                         "e.g. 0750 for your group")
    if mode & UNSAFE_MODE_BITS:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)
        raise ValueError(f"--results-mode {text} lets {who} write the results (anyone who can rewrite junit.xml "
                         f"changes the gate's verdict); use {mode & ~UNSAFE_MODE_BITS:04o}, which lets them read only")
    return mode


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` is, for messages: "a directory", "a character device"..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is if it exists and is not a regular file (symbolic links followed), e.g.
    "a character device"; None for a regular file or a path where nothing is (yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # nothing there (or a dangling link): a new file; a parent that cannot be used fails later
    return None if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode)


class OutputPathError(ValueError):
    """An output path the suite must not write; the message names the option, the path and the remedy."""


def check_output(what: str, path: Path) -> None:
    """OutputPathError unless ``path`` is a regular file or nothing yet: a device, FIFO, socket or
    directory is never replaced by a file (as root, ``--junit-xml /dev/null`` would replace the system's)."""
    kind = not_regular(path)
    if kind is not None:
        raise OutputPathError(f"{what} {path} is {kind}, not a regular file: vioconform writes its outputs as "
                              f"regular files and never replaces {kind}; give the path of a new file (or of a "
                              "regular file to replace)")


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path, or the same inode (hard links)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_not_taken(outputs: Sequence[tuple[str, Path | None]], taken: Sequence[tuple[str, Path]]) -> None:
    """OutputPathError for an output (a file or a directory) on one of the ``taken`` paths: files
    something else writes and deletes, such as a SQLite store's journal (reports.store.store_side_files),
    where an output would be reported written and then deleted."""
    for what, path in outputs:
        for other, other_path in taken:
            if path is not None and _same(path, other_path):
                raise OutputPathError(f"{what} {path} is {other}: the output would be deleted or overwritten; give "
                                      f"{what} a path of its own")


def enclosing_results_dir(path: Path) -> Path | None:
    """The results directory of a vioconform run that holds ``path`` (or is it), if any: a directory
    with a ``junit.xml`` beside the run's own ``raw/`` or ``phases*.json``, stored or not."""
    for d in (path.absolute(), *path.absolute().parents):
        if d.is_dir() and (d / "junit.xml").is_file() and ((d / "raw").is_dir() or any(d.glob("phases*.json"))):
            return d
    return None


def check_not_in_results_dirs(outputs: Sequence[tuple[str, Path | None]]) -> None:
    """OutputPathError for an output inside another run's results directory (:func:`enclosing_results_dir`):
    ``reports.compare --junit R/junit.xml`` would replace that run's record, whether or not a store holds it."""
    for what, path in outputs:
        held = enclosing_results_dir(path) if path is not None else None
        if held is not None:
            raise OutputPathError(f"{what} {path} is inside {held}, the results directory of a vioconform run: "
                                  f"writing it there would replace that run's files; give {what} a path outside it")


def check_outputs(outputs: Sequence[tuple[str, Path | None]],
                  inputs: Sequence[tuple[str, Path | None]] = (), taken: Sequence[tuple[str, Path]] = ()) -> None:
    """OutputPathError for an output that is not a regular file or a new one (:func:`check_output`),
    two outputs on one file (the JUnit file on the store's database), an output on an input of the
    same run (``--junit-xml`` on ``--image``), on a ``taken`` path (:func:`check_not_taken`: the
    store's journal), or inside another run's results directory (:func:`check_not_in_results_dirs`; the
    store's own file may be there). ``None`` paths are options not given."""
    outs = [(w, p) for w, p in outputs if p is not None]
    for what, path in outs:
        check_output(what, path)
    check_not_taken(outs, taken)
    check_not_in_results_dirs([(w, p) for w, p in outs if w != "--store"])
    for i, (what, path) in enumerate(outs):
        for other, other_path in [*outs[i + 1:], *((f"the input {w}", p) for w, p in inputs if p is not None)]:
            if _same(path, other_path):
                raise OutputPathError(f"{what} {path} is also {other}: one would overwrite the other; give "
                                      f"{what} a file of its own")


def check_not_in_run_files(outputs: Sequence[tuple[str, Path | None]], results_dir: Path,
                           run_files: Sequence[str]) -> None:
    """OutputPathError for an output that is, or lies in, one of the entries the run itself makes in
    ``results_dir`` (``run_files``: names or fnmatch patterns, such as ``phases.json`` or ``raw``):
    ``--junit-xml R/phases.json`` would replace the run's phases file with the JUnit file."""
    for what, path in outputs:
        if path is None:
            continue
        try:
            parts = path.resolve().relative_to(results_dir.resolve()).parts
        except ValueError:
            continue  # outside the results directory
        if parts and any(fnmatch.fnmatchcase(parts[0], f) for f in run_files):
            own = f"in the results directory's {parts[0]}/" if len(parts) > 1 else f"the results directory's {parts[0]}"
            raise OutputPathError(f"{what} {path} is {own}, which the run writes itself: one would overwrite the "
                                  f"other; give {what} a file of its own")


def _mkdirs(path: Path, mode: int) -> list[Path]:
    """Create ``path`` and its missing parents with ``mode``; returns those created, outermost first."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    created: list[Path] = []
    try:
        for d in reversed(missing):
            try:
                d.mkdir(mode=mode)
            except FileExistsError:
                if not d.is_dir():
                    raise
                continue  # another run made it meanwhile: theirs, not ours to remove
            created.append(d)
            d.chmod(mode)  # mkdir's mode passes through the umask
    except OSError:
        remove_empty(created)
        raise
    return created


def remove_empty(dirs: list[Path]) -> None:
    """Remove those of ``dirs`` (outermost first) that are still empty, innermost first."""
    for d in reversed(dirs):
        with contextlib.suppress(OSError):
            d.rmdir()


def unique_dir(parent: Path, stamp: str, mode: int = DEFAULT_DIR_MODE) -> tuple[Path, list[Path]]:
    """``parent/stamp``, or ``stamp-2``, ``stamp-3``... if taken: created exclusively, so no two
    runs ever share one. Returns it and every directory created (parents included)."""
    created = _mkdirs(parent, mode)
    for n in range(1, 10_000):
        path = parent / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir(mode=mode)
        except FileExistsError:
            continue
        except OSError:
            remove_empty(created)
            raise
        path.chmod(mode)
        return path, [*created, path]
    remove_empty(created)
    raise FileExistsError(f"{parent / stamp}: 9,999 runs already started in that second")


def _probe_writable(directory: Path) -> None:
    """Create and remove a file in ``directory``: access() says yes to root on a read-only mount."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=".vioconform-probe-")
    os.close(fd)
    os.unlink(name)


@dataclass
class ResultsDir:
    """The run's results directory, where its JUnit file goes, and what the run created."""

    path: Path
    junit_path: Path
    dir_mode: int = DEFAULT_DIR_MODE
    created: list[Path] = field(default_factory=list)
    #: When the run started (aware, UTC): its JUnit suite's ``timestamp``, whatever the machine's time
    #: zone (the directory's default name is the same moment in local time)
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def file_mode(self) -> int:
        return file_mode(self.dir_mode)

    def make_private(self) -> None:
        """Give everything under the results directory the results mode (rules write raw files
        with the process's umask; the directory itself was 0700 from the start). A reproducer
        bundle's ``replay`` (``reproducers/<bundle>/replay``) keeps the mode's execute bits."""
        for root, dirs, files in os.walk(self.path):
            for d in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(root, d), self.dir_mode, follow_symlinks=False)
            for f in files:
                p = os.path.join(root, f)
                if not os.path.islink(p):
                    with contextlib.suppress(OSError):
                        replay = f == "replay" and os.path.basename(os.path.dirname(root)) == REPRODUCERS_DIR
                        os.chmod(p, self.file_mode | (self.dir_mode & 0o111 if replay else 0))

    def remove_if_unused(self) -> None:
        """Remove the directories this run created if nothing was written in them."""
        remove_empty(self.created)


def _fix(what: str) -> str:
    return (f"give {what} a directory you can write to (new or empty), e.g. --results-dir "
            f"~/vioconform-results/run1")


def open_results(requested: Path | None, junit: Path | None, dir_mode: int = DEFAULT_DIR_MODE,
                 now: time.struct_time | None = None, parent: Path = DEFAULT_PARENT) -> ResultsDir:
    """Create (or take, if new or empty) the results directory and check the JUnit file's place.

    ``requested`` is ``--results-dir`` (None: a fresh ``parent/<date-time>``), ``junit`` is
    ``--junit-xml`` (None: ``junit.xml`` in the results directory). Raises ResultsDirError
    with a sentence that says what to do.
    """
    created: list[Path] = []
    started = dt.datetime.now(dt.UTC)
    try:
        if requested is None:
            stamp = time.strftime("%Y%m%d-%H%M%S", now or time.localtime(started.timestamp()))
            try:
                path, created = unique_dir(parent.resolve(), stamp, dir_mode)
            except OSError as e:
                raise ResultsDirError(f"cannot create the results directory under {parent.resolve()}: "
                                      f"{e.strerror or e}; run from a directory you can write to, or "
                                      f"{_fix('--results-dir')}") from None
        else:
            path = requested.resolve()
            if path.exists() and not path.is_dir():
                raise ResultsDirError(f"--results-dir {path} exists and is not a directory; {_fix('--results-dir')}")
            if path.is_dir():
                held = sorted(p.name for p in path.iterdir())
                if held:
                    shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
                    raise ResultsDirError(f"--results-dir {path} is not empty (it holds {shown}); vioconform never "
                                          f"writes over earlier results: give a new or empty directory, or leave "
                                          f"--results-dir out for a fresh results/<date-time>")
            try:
                created = _mkdirs(path, dir_mode)
                if not created:  # an existing empty directory becomes this run's: private like a new one
                    path.chmod(dir_mode)
                _probe_writable(path)
            except OSError as e:
                raise ResultsDirError(f"--results-dir {path}: cannot use it as the results directory "
                                      f"({e.strerror or e}); {_fix('--results-dir')}") from None
        junit_path = path / "junit.xml"
        if junit is not None:
            junit_path = junit.resolve()
            if junit_path.is_dir():
                raise ResultsDirError(f"--junit-xml {junit_path} is a directory; give a file name, e.g. "
                                      f"{junit_path / 'junit.xml'}")
            try:
                check_output("--junit-xml", junit_path)
            except OutputPathError as e:
                raise ResultsDirError(str(e)) from None
            try:
                created += _mkdirs(junit_path.parent, dir_mode)
                _probe_writable(junit_path.parent)
            except OSError as e:
                raise ResultsDirError(f"--junit-xml {junit_path}: cannot write in {junit_path.parent} "
                                      f"({e.strerror or e}); give a path in a directory you can write to") from None
    except ResultsDirError:
        remove_empty(created)
        raise
    return ResultsDir(path, junit_path, dir_mode, created, started)


class NotARegularFile(OSError):
    """An output path that holds something other than a regular file (a device, a FIFO, a directory):
    never replaced. An OSError, so a writer reports it as it reports a full disk."""


def write_atomic(path: Path, text: str, mode: int = file_mode(DEFAULT_DIR_MODE)) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    Readers (and a disk that fills up: ENOSPC) see the previous file or the whole new one,
    never a truncated one; the temporary file is removed on any error, which propagates.
    The rename happens only while ``path`` is a regular file or nothing: a device node or a FIFO
    there is never replaced (NotARegularFile), and nothing is ever written through it.
    """
    kind = not_regular(path)
    if kind is not None:
        raise NotARegularFile(errno.EEXIST, f"it is {kind}, not a regular file: not replaced", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        kind = not_regular(path)  # again: the check above may be seconds old (a large report, a slow disk)
        if kind is not None:
            raise NotARegularFile(errno.EEXIST, f"it is {kind}, not a regular file: not replaced", str(path))
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path

