"""The documentation: the mkdocs site builds strictly, the README stays a short way in and lists every page, the
settings reference names every setting the code reads, and no page speaks of tracker numbers."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 200
# The word issue (or ticket), then a number, with or without '#': how a tracker number reads in prose.
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? ?#?[0-9]|\b[Tt]ickets? ?#?[0-9]")
# Markdown links and images with a relative target: [text](target) or ![alt](target).
RELATIVE_LINK = re.compile(r"!?\[[^\]]*\]\((?!https?://|mailto:|#)([^)\s]+)\)")
RESULT_FILE = re.compile(r"bench/results/([A-Za-z0-9_.-]+\.json)")
OPERATIONS = ROOT / "docs" / "operations.md"
# The packages the project ships (the server, the engine, the models, the CLI, the trainers, the client): a VELA_*
# name written in their code is a setting someone can set. Benches and tests only pass settings on.
SHIPPED_CODE = ("service", "indexing", "models", "cli", "velaio", "training", "client/vela_client")
VELA_NAME = re.compile(r"VELA_[A-Z0-9_]*[A-Z0-9]")


def _user_docs() -> list[Path]:
    return [README, ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]


def test_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (it is pinned in requirements.lock)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (it is pinned in requirements.lock)")
    site = tmp_path / "site"
    # NO_MKDOCS_2_WARNING: mkdocs-material prints a banner about its end of life on every build, not a doc problem.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
        + ["--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = done.stdout + done.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0, log
    assert warnings == []
    assert (site / "index.html").is_file()
    assert (site / "results" / "index.html").is_file()


def test_readme_is_a_short_way_in() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_no_user_facing_page_mentions_issue_numbers() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _user_docs()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ISSUE_NUMBER.search(line)
    ]
    assert hits == []


def test_readme_lists_every_page_of_the_site() -> None:
    nav_pages = set(re.findall(r"^\s*-\s.*:\s*([A-Za-z0-9_-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    assert len(nav_pages) > 10, "mkdocs.yml's nav was read"
    linked = {t.split("#", 1)[0] for t in RELATIVE_LINK.findall(README.read_text(encoding="utf-8"))}
    missing = sorted(page for page in nav_pages if f"docs/{page}" not in linked)
    assert missing == [], "README.md's Documentation table should link every page of mkdocs.yml's nav"


def _settings_the_code_reads() -> set[str]:
    """Every VELA_* variable: the settings classes' fields (with their prefix), and every VELA_* name that the
    shipped code spells out as a string of its own (os.environ reads, constants such as ENCODER_ENV)."""
    from service.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    names = {f"{prefix}{field}".upper() for field in Settings.model_fields}
    for package in SHIPPED_CODE:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and VELA_NAME.fullmatch(node.value):
                    names.add(node.value)
    return names


def test_operations_names_every_setting_the_code_reads() -> None:
    names = _settings_the_code_reads()
    assert {"VELA_DATA_DIR", "VELA_FUSION_AUTO", "VELA_URL"} <= names, "the settings were found"
    documented = set(VELA_NAME.findall(OPERATIONS.read_text(encoding="utf-8")))
    missing = sorted(names - documented)
    assert missing == [], "docs/operations.md should list these settings (full names, not `_SUFFIX` shorthand)"


def test_readme_links_point_at_files_that_exist() -> None:
    targets = RELATIVE_LINK.findall(README.read_text(encoding="utf-8"))
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_every_cited_result_file_exists() -> None:
    cited = {name for path in _user_docs() for name in RESULT_FILE.findall(path.read_text(encoding="utf-8"))}
    # Patterns such as eval-DATASET.json or NAME.json name a family of files, not one.
    concrete = {name for name in cited if not re.search(r"[A-Z]{3,}", name)}
    assert concrete, "the docs cite their result files"
    missing = sorted(name for name in concrete if not (ROOT / "bench" / "results" / name).is_file())
    assert missing == []
