"""The CPU caches the benchmarks record (dkrr._system.cache_sizes, last_level_cache): read
from Linux's sysfs format, written here under a temporary root; a missing or unreadable
listing gives the documented default."""

from __future__ import annotations

import os

from dkrr._system import CACHE_ROOT, DEFAULT_CACHE_BYTES, last_level_cache


def _cache(root, name, level, size):
    d = root / name
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "size").write_text(f"{size}\n")


def test_the_largest_listed_cache_in_the_kernels_units(tmp_path):
    _cache(tmp_path, "index0", 1, "32K")
    _cache(tmp_path, "index1", 1, "32K")
    _cache(tmp_path, "index2", 2, "1024K")
    _cache(tmp_path, "index3", 3, "32768K")
    assert last_level_cache(str(tmp_path)) == 32 * 2**20
    _cache(tmp_path, "index4", 4, "2M")  # a larger unit, a smaller cache
    assert last_level_cache(str(tmp_path)) == 32 * 2**20
    _cache(tmp_path, "index5", 4, "64M")
    assert last_level_cache(str(tmp_path)) == 64 * 2**20


def test_unreadable_or_foreign_entries_are_skipped(tmp_path):
    _cache(tmp_path, "index0", 1, "48K")
    _cache(tmp_path, "index1", 2, "not a size")
    _cache(tmp_path, "index2", 3, "0K")
    (tmp_path / "index3").mkdir()  # no size file
    (tmp_path / "uevent").write_text("x\n")  # not a cache
    assert last_level_cache(str(tmp_path)) == 48 * 2**10


def test_no_listing_gives_the_default(tmp_path):
    assert last_level_cache(str(tmp_path / "missing")) == DEFAULT_CACHE_BYTES
    assert last_level_cache(str(tmp_path)) == DEFAULT_CACHE_BYTES  # an empty folder


def test_this_machine(tmp_path):
    size = last_level_cache()
    assert size > 0
    if not os.path.isdir(CACHE_ROOT):
        assert size == DEFAULT_CACHE_BYTES


def test_every_listed_cache_with_its_level(tmp_path):
    from dkrr._system import cache_sizes

    _cache(tmp_path, "index0", 1, "48K")
    _cache(tmp_path, "index2", 2, "2048K")
    _cache(tmp_path, "index3", 3, "266240K")
    _cache(tmp_path, "index4", 2, "not a size")
    assert sorted(cache_sizes(str(tmp_path)), key=lambda c: c[1]) == [(1, 48 * 2**10), (2, 2 * 2**20),
                                                                      (3, 260 * 2**20)]
    (tmp_path / "index3" / "level").unlink()
    assert (None, 260 * 2**20) in cache_sizes(str(tmp_path))
    assert cache_sizes(str(tmp_path / "missing")) == []
