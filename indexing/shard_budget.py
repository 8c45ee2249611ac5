"""How many shards a data directory may hold: every process that serves it opens every shard and keeps its files
open (a shard's doc store with its write-ahead log and shared memory, and each segment's memory-mapped postings),
so shards, not collections, are what spends the open-files limit (RLIMIT_NOFILE).

Measured (Linux, a searched shard): 5 files for the doc store (two SQLite connections, each with its -wal, and the
shared -shm), and 4 per segment (indptr, rows, tf and lengths mapped). The merge policy keeps at most 10 segments
per shard (indexing/merge_policy.py), so a shard holds at most 45: FDS_PER_SHARD budgets 48."""

from __future__ import annotations

from dataclasses import dataclass

FDS_PER_SHARD = 48
MAX_SHARDS_PER_COLLECTION = 64  # a new collection's shards (one that was made with more before is still read)
FDS_RESERVED = 256  # beside the sockets: the job store, models, logs, pipes, uploads being written
MIN_SHARD_CAP = 16  # what a low open-files limit still allows (typically about 10 files a shard: see above)


class ShardLimitExceeded(ValueError):
    """A new collection would take the data directory past its shard cap (nothing was created)."""


@dataclass(frozen=True)
class ShardCap:
    """The most shards of a data directory, and what sets it (a setting, or the open-files limit)."""

    limit: int
    source: str


def shards_the_limit_holds(open_files: int, sockets: int) -> int:
    """Shards whose files fit in `open_files` once `sockets` connections and FDS_RESERVED are set aside."""
    return max(0, (open_files - sockets - FDS_RESERVED) // FDS_PER_SHARD)


def shard_cap(setting: int, setting_name: str, open_files: int | None, sockets: int) -> ShardCap:
    """The lower of the setting and what the open-files limit holds (where the platform has one), but never below
    MIN_SHARD_CAP: the budget is the worst case (every connection open, every shard at its most segments), and a
    host whose hard limit is a few thousand should still serve a few collections, not refuse the first one."""
    if open_files is not None:
        held = max(shards_the_limit_holds(open_files, sockets), min(setting, MIN_SHARD_CAP))
        if held < setting:
            return ShardCap(held, f"what this process's open-files limit of {open_files} holds (RLIMIT_NOFILE)")
    return ShardCap(setting, setting_name)


def check_new_collection(name: str, shards: int) -> None:
    """ShardLimitExceeded for a new collection of more than MAX_SHARDS_PER_COLLECTION shards."""
    if shards > MAX_SHARDS_PER_COLLECTION:
        raise ShardLimitExceeded(
            f"collection {name!r} would have {shards} shards; a collection has at most {MAX_SHARDS_PER_COLLECTION}"
        )


def check_shard_cap(cap: ShardCap | None, *, name: str, held: int, adding: int) -> None:
    """ShardLimitExceeded when `adding` more shards would take the `held` ones past the cap."""
    if cap is not None and held + adding > cap.limit:
        raise ShardLimitExceeded(
            f"collection {name!r} would add {adding} shard(s) to the {held} this data directory holds; the limit is "
            f"{cap.limit} shards ({cap.source}): delete a collection, or raise the limit"
        )
