"""`vela serve`: the HTTP API, in this process or in one API process per CPU core (service/processes.py).

vela serve [--host H] [--port P] [--data-dir D] [--processes N]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from cli.arg_types import non_negative_int, port_number


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=None, help="bind address (default VELA_HOST or 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=None, help="port (default VELA_PORT or 8000)")
    p.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    p.add_argument(
        "--processes",
        type=non_negative_int,
        default=None,
        help="API processes on the one port (default VELA_PROCESSES; 0: one per CPU core, at most 4)",
    )


def _run_one(args: argparse.Namespace, sock: socket.socket | None = None) -> int:
    """One API process: on its own port, or accepting on the supervisor's socket (in a forked process)."""
    from service.main import create_app
    from service.server import StopSignalServer, uvicorn_config
    from service.settings import Settings
    from service.state import begin_stop

    settings = Settings()  # read here: a forked process has VELA_SERVING_PROCESSES set by now
    app = create_app(settings)
    # Header, keep-alive and connection limits come from the settings (VELA_HEADER_TIMEOUT_S and the rest). From
    # its SIGTERM on, the process starts no job while it drains its connections (service/server.py).
    config = uvicorn_config(app, settings, host=args.host, port=args.port)
    server = StopSignalServer(config, on_stop_signal=lambda: begin_stop(app.state.vela))
    server.run(sockets=[sock] if sock is not None else None)
    return 0


def main(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = args.data_dir
    if args.processes is not None:
        os.environ["VELA_PROCESSES"] = str(args.processes)
    from pydantic import ValidationError

    from indexing.logs import configure_logging
    from models.device import DeviceError, resolve_device
    from service.processes import serve
    from service.settings import Settings
    from service.startup_checks import settings_error, startup_problem

    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"vela serve: {settings_error(exc)}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    try:  # `cuda` without CUDA stops here, before anything serves or reads the data directory
        device = resolve_device(settings.device)
    except DeviceError as e:
        print(f"vela serve: {e}", file=sys.stderr)
        return 2
    problem = startup_problem(settings)
    if problem is not None:  # before any process starts: a process would fail to start, again and again
        print(f"vela serve: {problem}", file=sys.stderr)
        return 2
    n = settings.process_count(gpu=device.startswith("cuda"))
    if n == 1:
        return _run_one(args)
    port = args.port or settings.port
    metrics = settings.data_dir.expanduser().resolve() / "run" / f"metrics-{port}"  # one server per port and data dir
    return serve(n, args.host or settings.host, port, lambda sock: _run_one(args, sock), metrics)
