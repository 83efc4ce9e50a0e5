"""One cache directory for the image and the KVM probe, and an error naming XDG_CACHE_HOME when
it cannot be written; the probe cache stays readable by earlier versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypervisors.libvirt import accel
from images import build
from images.cache import CacheNotWritable, cache_dir, writable_dir


def test_cache_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "vioconform"
    assert build.cache_root() == tmp_path / "xdg" / "vioconform" / "images"
    assert accel.cache_file() == tmp_path / "xdg" / "vioconform" / "accel-probe.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # empty means unset (XDG base directory spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "vioconform"


def test_unwritable_cache_names_the_remedy(tmp_path: Path) -> None:
    home_is_a_file = tmp_path / "home"
    home_is_a_file.write_text("")
    target = home_is_a_file / ".cache" / "vioconform" / "images"
    with pytest.raises(CacheNotWritable) as e:
        writable_dir(target, "image cache")
    assert str(e.value) == (f"cannot write the image cache at {target} (not a directory); "
                            "set XDG_CACHE_HOME to a writable directory")
    assert writable_dir(tmp_path / "ok" / "images", "image cache").is_dir()
    assert list((tmp_path / "ok" / "images").iterdir()) == []  # the write test leaves nothing


def test_probe_cache_keeps_causes_beside_the_old_booleans(tmp_path: Path) -> None:
    cache = tmp_path / "accel-probe.json"
    # written by an earlier version: a failure without a cause counts as not probed
    cache.write_text(json.dumps({"qemu:///system|a": False, "qemu:///system|b": True}))
    assert accel._load(cache) == {"qemu:///system|b": accel.ProbeResult(True)}
    known = {"k1": accel.ProbeResult(False, "failed to set MSR 0x10a to 0x69"), "k2": accel.ProbeResult(True)}
    accel._save(cache, known)
    raw = json.loads(cache.read_text())
    assert raw["k1"] is False and raw["k2"] is True  # what an earlier version reads
    assert accel._load(cache) == known


def test_forced_kvm_error_names_cause_and_remedy() -> None:
    assert str(accel.KvmUnusable("failed to set MSR 0x10a to 0x69")) == (
        "--accel kvm: KVM cannot boot a guest on this host (failed to set MSR 0x10a to 0x69); "
        "use --accel auto (falls back to TCG) or --accel tcg")


def test_an_answer_from_the_cache_says_where_it_is_kept_and_how_to_probe_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said = str(accel.KvmUnusable("no marker", cached=True))
    assert said.endswith(f"; the probe's answer is cached in {tmp_path}/vioconform/accel-probe.json: remove that "
                         "file to probe again")
