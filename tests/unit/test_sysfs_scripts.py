"""The sysfs tool's limits and path scripts read every file with the shell's own ``read``, not a ``cat`` per
file (a process each: 10-20 ms under TCG, a dozen a script): run here with the host's ``sh`` and
busybox's on the host's own disk, with a PATH that holds ``readlink`` alone, they still print every
value, the same the files hold."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from guest.tools.sysfs import LIMITS_SCRIPT, PATH_SCRIPT
from model.device_limits import parse_guest_limits, parse_guest_path_limits

DISKS = sorted(p.name for p in Path("/sys/block").glob("*") if (p / "mq").is_dir() and (p / "device").exists())
SHELLS = [s for s in ("/bin/sh", shutil.which("busybox")) if s]


def run_with_readlink_only(shell: str, script: str, tmp_path: Path) -> str:
    """``script`` with no program but ``readlink`` on the PATH: cat, ls, wc and head are not there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    readlink = shutil.which("readlink")
    assert readlink is not None
    link = bin_dir / "readlink"
    if not link.exists():
        link.symlink_to(readlink)
    argv = [shell, "sh", "-c", script] if shell.endswith("busybox") else [shell, "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": str(bin_dir)}, timeout=30, check=False)
    assert "not found" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.skipif(not DISKS, reason="this host shows no blk-mq disk with a device under /sys/block")
@pytest.mark.parametrize("shell", SHELLS)
def test_the_limits_script_reads_every_value_without_a_process_per_file(shell: str, tmp_path: Path) -> None:
    disk = DISKS[0]
    out = run_with_readlink_only(shell, LIMITS_SCRIPT.replace("{disk}", disk), tmp_path)
    q = Path("/sys/block") / disk / "queue"
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for key in ("nr_requests", "max_sectors_kb", "logical_block_size", "physical_block_size", "read_ahead_kb"):
        assert lines[key] == (q / key).read_text().strip(), key
    assert lines["write_cache"] == (q / "write_cache").read_text().strip()  # "write back": the space kept
    assert int(lines["nr_hw_queues"]) == len(list((Path("/sys/block") / disk / "mq").iterdir()))
    parsed = parse_guest_limits(out)
    assert parsed.logical_block_size == int((q / "logical_block_size").read_text())


@pytest.mark.skipif(not DISKS, reason="this host shows no blk-mq disk with a device under /sys/block")
@pytest.mark.parametrize("shell", SHELLS)
def test_the_path_script_reads_its_files_without_a_process_per_file(shell: str, tmp_path: Path) -> None:
    disk = DISKS[0]
    out = run_with_readlink_only(shell, PATH_SCRIPT.replace("{disk}", disk), tmp_path)
    q = Path("/sys/block") / disk
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert lines["dev"] == (q / "dev").read_text().strip()
    assert lines["nr_requests"] == (q / "queue" / "nr_requests").read_text().strip()
    assert lines["scheduler"] == (q / "queue" / "scheduler").read_text().strip()
    parse_guest_path_limits(out, disk)
