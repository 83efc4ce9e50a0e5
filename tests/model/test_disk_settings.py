"""--disk KEY=VALUE,... and --profile NAME,...: parsed once into data, errors that name the bad
key or value and what it takes (model/disk_settings.py, model/profiles.py)."""

from __future__ import annotations

import pytest

from model.disk_settings import KEYS, DiskSettings, DiskSettingsError, combination_problem, parse_disk_settings
from model.profiles import PROFILES, ProfileError, parse_profiles


def test_nothing_asked_is_the_suites_own_disk_and_an_empty_id_part() -> None:
    assert DiskSettings().pairs() == ()
    assert str(DiskSettings()) == ""


def test_the_pairs_are_what_was_asked_sorted_as_strings() -> None:
    s = parse_disk_settings("cache=none,aio=native,iops=500,logical_block_size=4096")
    assert s == DiskSettings(cache="none", aio="native", iops=500, logical_block_size=4096)
    assert s.pairs() == (("aio", "native"), ("cache", "none"), ("iops", "500"), ("logical_block_size", "4096"))
    assert str(s) == "aio=native,cache=none,iops=500,logical_block_size=4096"


def test_a_dash_in_a_key_is_the_same_key() -> None:
    assert parse_disk_settings("detect-zeroes=unmap").detect_zeroes == "unmap"


@pytest.mark.parametrize(("text", "says"), [
    ("cachemode=none", "no setting 'cachemode'; the keys are cache, aio, iothread"),
    ("cache=fast", "--disk cache=fast: cache takes writeback, none, writethrough, directsync, unsafe"),
    ("aio=posix", "aio takes threads, native, io_uring"),
    ("logical_block_size=4000", "logical_block_size takes a block size in bytes, one of 512, 1024"),
    ("iops=0", "iops takes a whole number above 0 (I/Os per second)"),
    ("bps=lots", "bps takes a whole number above 0 (bytes per second)"),
    ("wwn=0000000000000000", "a WWN is 16 hex digits, not all zero"),
    ("serial=has space", "a serial is 1 to 36 letters"),
    ("cache", "'cache' is not KEY=VALUE"),
    ("cache=none,cache=unsafe", "cache is given twice"),
    ("cache=writeback,aio=native", "aio=native needs cache=none or cache=directsync"),
    ("discard=ignore,detect_zeroes=unmap", "detect_zeroes=unmap needs discard=unmap"),
    ("logical_block_size=4096,physical_block_size=512", "below logical_block_size=4096"),
])
def test_a_bad_value_names_itself_and_what_is_allowed(text: str, says: str) -> None:
    with pytest.raises(DiskSettingsError) as e:
        parse_disk_settings(text)
    assert says in str(e.value)


def test_every_key_parses() -> None:
    text = ("cache=directsync,aio=native,iothread=on,discard=unmap,detect_zeroes=unmap,logical_block_size=512,"
            "physical_block_size=4096,format=qcow2,serial=VOL-1,wwn=0x5000C50015EA7100,iops=100,bps=1048576,"
            "disk_mode=independent_persistent,sharing=multi_writer")
    s = parse_disk_settings(text)
    assert [k for k, _ in s.pairs()] == sorted(KEYS)
    assert s.wwn == "5000c50015ea7100"


def test_what_the_guest_is_told_of_the_write_cache_follows_qemus_cache_mode() -> None:
    assert DiskSettings().host_writeback is None
    assert DiskSettings(cache="none").host_writeback is True
    assert DiskSettings(cache="writethrough").host_writeback is False
    assert DiskSettings(cache="directsync").host_writeback is False


def test_a_disk_option_goes_over_a_profile() -> None:
    merged = PROFILES["nova"].settings.merged(DiskSettings(cache="writeback"))
    assert merged.cache == "writeback" and merged.format == "qcow2"


def test_profiles_parse_in_order_and_refuse_unknown_or_repeated_names() -> None:
    assert [p.name for p in parse_profiles("proxmox,nova")] == ["proxmox", "nova"]
    with pytest.raises(ProfileError, match="esxi: no such profile; the profiles are nova, proxmox, kubevirt, ovirt, "
                                           "virt-install"):
        parse_profiles("nova,esxi")
    with pytest.raises(ProfileError, match="nova more than once"):
        parse_profiles("nova,nova")


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_is_a_combination_qemu_takes_and_cites_its_source(name: str) -> None:
    profile = PROFILES[name]
    assert combination_problem(profile.settings) == ""
    assert profile.sources and all("/" in repo for repo, _ in profile.sources)
    assert profile.controller in ("virtio-blk", "virtio-scsi")
