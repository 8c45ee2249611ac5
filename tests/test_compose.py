"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine needed)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "Dockerfile"

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# `${VAR}`, `${VAR:-}` or `${VAR-}`: taken from the host environment, with no default value.
ENV_INTERPOLATION = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:?-)?\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _argv(command: str | list[str] | None) -> list[str]:
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    return [str(c) for c in command]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # ["NAME=value", ...]
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _vela_subcommands() -> set[str]:
    from cli.main import build_parser

    parser = build_parser()
    assert parser._subparsers is not None
    return set(parser._subparsers._group_actions[0].choices)


def test_expected_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"redis", "api", "worker"} <= set(services)


def test_api_and_worker_share_redis_and_data(services: dict[str, dict[str, Any]]) -> None:
    api, worker = _environment(services["api"]), _environment(services["worker"])
    assert api["VELA_REDIS_URL"] == worker["VELA_REDIS_URL"] and api["VELA_REDIS_URL"].startswith("redis://redis:")
    assert api["VELA_DATA_DIR"] == worker["VELA_DATA_DIR"] == "/data"
    assert services["worker"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["worker"]["volumes"] == services["api"]["volumes"]


def test_every_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        check = svc.get("healthcheck")
        assert check, f"service {name!r} has no healthcheck"
        assert not check.get("disable", False), f"service {name!r} disables its healthcheck"
        assert _argv(check.get("test")), f"service {name!r} has an empty healthcheck test"


def test_redis_persists_with_aof(services: dict[str, dict[str, Any]]) -> None:
    redis = services["redis"]
    assert str(redis["image"]).startswith("redis:7")
    argv = _argv(redis.get("command"))
    assert "--appendonly" in argv, "redis must run with AOF persistence"
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in redis.get("volumes", [])), "redis /data must be a volume"
    assert "redis-cli" in _argv(redis["healthcheck"]["test"])


def test_api_waits_for_healthy_redis(services: dict[str, dict[str, Any]]) -> None:
    depends = services["api"].get("depends_on")
    assert isinstance(depends, dict), "api.depends_on must use the long form with a condition"
    assert depends["redis"]["condition"] == "service_healthy"


def test_api_healthcheck_hits_healthz(services: dict[str, dict[str, Any]]) -> None:
    test = " ".join(_argv(services["api"]["healthcheck"]["test"]))
    assert "/healthz" in test


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if not source.startswith((".", "/", "~", "$")):
                assert source in declared, f"service {name!r} uses undeclared volume {source!r}"
    assert any(str(v).endswith(":/data") for v in services["api"].get("volumes", []))
    assert _environment(services["api"]).get("VELA_DATA_DIR") == "/data"


def test_no_hard_coded_secrets(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for key, value in _environment(svc).items():
            if SECRET_NAME.search(key):
                assert ENV_INTERPOLATION.match(value), (
                    f"{name}.environment.{key} must come from the host environment as ${{{key}:-}}, got {value!r}"
                )
    assert _environment(services["api"]).get("VELA_API_KEYS") == "${VELA_API_KEYS:-}"


def test_compose_vela_commands_exist(services: dict[str, dict[str, Any]]) -> None:
    known = _vela_subcommands()
    used = []
    for name, svc in services.items():
        argv = _argv(svc.get("command"))
        if argv and argv[0] == "vela":
            assert len(argv) > 1, f"service {name!r} runs `vela` with no subcommand"
            assert argv[1] in known, f"service {name!r} runs `vela {argv[1]}`, not a subcommand of {sorted(known)}"
            used.append(argv[1])
    assert {"serve", "worker"} <= set(used)


def test_dockerfile_cmd_and_user() -> None:
    text = DOCKERFILE.read_text()
    cmds = [line for line in text.splitlines() if line.startswith("CMD ")]
    assert len(cmds) == 1
    argv = json.loads(cmds[0][len("CMD ") :])
    assert argv[0] == "vela" and argv[1] in _vela_subcommands()
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}, "the image must run as a non-root user"
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in text
