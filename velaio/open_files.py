"""The open-files limit (RLIMIT_NOFILE) of this process: raised to what the system allows at start-up.

Every open collection holds files open for as long as the process runs (each shard's SQLite doc store, its
write-ahead log and shared memory, and its segments' memory-mapped postings), and every connection a socket. A
soft limit of 1,024, the default of many shells and of systemd services, is reached by a few hundred shards; the
hard limit is usually far higher (524,288 under systemd, 1,048,576 in Docker) and a process may raise its own soft
limit up to it, as databases and search engines do at start-up."""

from __future__ import annotations

import logging

log = logging.getLogger("vela.open_files")

try:
    import resource
except ImportError:  # not on this platform (Windows): the limit is the C runtime's, left as it is
    resource = None  # type: ignore[assignment]

# Where the hard limit is "unlimited" (macOS), the soft one cannot be: the most a process may then ask for.
UNLIMITED_CAP = 1 << 20


def open_files_limit() -> int | None:
    """This process's soft limit on open files, or None where there is none to read."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_files_limit() -> int | None:
    """Raise the soft limit on open files to the hard limit (children started after inherit it); log both.
    Returns the soft limit in force afterwards (None where there is none). Never fails: a limit that cannot be
    raised is logged and left as it was."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("open files limit not raised", extra={"soft": soft, "hard": hard, "error": str(exc)})
            return open_files_limit()
        log.info("open files limit raised", extra={"from": soft, "to": target, "hard": hard})
    else:
        log.info("open files limit", extra={"soft": soft, "hard": hard})
    return open_files_limit()
