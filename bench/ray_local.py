"""A two-node Ray cluster on loopback (`ray start --head` + one `ray start --address`), for tests and benches.

Both nodes run on this machine and declare `cpus` logical CPUs each (Ray schedules by logical CPUs, so the
declared count may exceed the cores). `ray stop` at the end stops every Ray process of this machine: do
not use it where another Ray cluster runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import free_port

RAY = str(Path(sys.executable).with_name("ray"))


def _ray(*args: str) -> None:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([RAY, *args], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=180)


def _wait_nodes(address: str, nodes: int, timeout: float = 120) -> None:
    """Until `nodes` raylets are alive (checked in a child process: this one must not become a driver)."""
    code = (
        f"import ray; ray.init(address={address!r}, log_to_driver=False); "
        "print(len([n for n in ray.nodes() if n['Alive']]))"
    )
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        if out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(nodes)]:
            return
        time.sleep(1)
    raise TimeoutError(f"Ray cluster at {address} did not reach {nodes} nodes")


@contextmanager
def local_cluster(*, cpus: int = 4, object_store_mb: int = 512) -> Iterator[str]:
    """Start the cluster, yield its address (host:port), stop it."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus", str(cpus), "--object-store-memory", str(object_store_mb * 1024 * 1024)]
    common += ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    try:
        _ray("start", "--head", "--port", str(port), "--include-dashboard", "false", *common)
        _ray("start", "--address", address, *common)
        _wait_nodes(address, 2)
        yield address
    finally:
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()  # a driver still connected when the cluster goes would be made to exit with it
        subprocess.run([RAY, "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
