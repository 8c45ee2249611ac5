"""file_lock refuses a second take of a lock by the thread that holds it (a flock on a second open of the same file
would wait for the first for ever), while another thread of the process still waits for it as a process does."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from velaio.files import LockReentered, file_lock, try_file_lock


def test_the_holding_thread_taking_its_lock_again_is_refused_not_left_waiting(tmp_path: Path) -> None:
    path = tmp_path / "write.lock"
    with file_lock(path):
        with pytest.raises(LockReentered, match="write.lock"), file_lock(path):
            pass
        (tmp_path / "alias.lock").hardlink_to(path)
        with pytest.raises(LockReentered), file_lock(tmp_path / "alias.lock"):  # the same file, another name
            pass
        with file_lock(tmp_path / "other.lock"):  # another lock is taken as before
            pass
    with file_lock(path):  # released: taken again
        pass
    with try_file_lock(path) as ours:
        assert ours
        with pytest.raises(LockReentered), file_lock(path):
            pass


def test_another_thread_waits_for_the_lock_and_gets_it_once_released(tmp_path: Path) -> None:
    path = tmp_path / "write.lock"
    got = threading.Event()

    def take() -> None:
        with file_lock(path):
            got.set()

    with file_lock(path):
        other = threading.Thread(target=take)
        other.start()
        # Still held here: the other thread cannot have it, whatever its progress.
        assert not got.is_set()
    other.join(30)
    assert got.is_set()
