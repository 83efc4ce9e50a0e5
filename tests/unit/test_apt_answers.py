"""apt's answers (the image's kernel package, fio's source version) are remembered while apt's
state stays as it was, and asked again once it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from images import cache


@pytest.fixture
def apt_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    lists = tmp_path / "lists"
    lists.mkdir()
    monkeypatch.setattr(cache, "APT_STATE_FILES", (lists, tmp_path / "status"))
    return lists


def test_an_answer_is_remembered_until_apts_state_changes(apt_state: Path, tmp_path: Path) -> None:
    asked = []

    def ask() -> list[str]:
        asked.append(1)
        return ["linux-image-6.1.0-56-amd64", f"6.1.192-{len(asked)}"]

    assert cache.apt_answer("kernel", ask) == ["linux-image-6.1.0-56-amd64", "6.1.192-1"]
    assert cache.apt_answer("kernel", ask) == ["linux-image-6.1.0-56-amd64", "6.1.192-1"]
    assert len(asked) == 1
    (tmp_path / "status").write_text("Package: fio\n")  # dpkg installed something
    assert cache.apt_answer("kernel", ask) == ["linux-image-6.1.0-56-amd64", "6.1.192-2"]
    assert cache.apt_answer("fio", lambda: "3.33-3") == "3.33-3"
    assert cache.apt_answer("kernel", ask)[1] == "6.1.192-2" and len(asked) == 2


def test_without_a_writable_cache_apt_is_asked_every_time(apt_state: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ro").write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    asked = []

    def ask() -> str:
        asked.append(1)
        return "3.33-3"

    for _ in range(2):
        assert cache.apt_answer("fio", ask) == "3.33-3"
    assert len(asked) == 2


def test_a_damaged_memo_is_asked_again(apt_state: Path, tmp_path: Path) -> None:
    memo = tmp_path / "xdg" / "vioconform" / "apt-answers.json"
    memo.parent.mkdir(parents=True)
    memo.write_text("{not json")
    assert cache.apt_answer("fio", lambda: "3.33-3") == "3.33-3"
    assert cache.apt_answer("fio", lambda: "other") == "3.33-3"
