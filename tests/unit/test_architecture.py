"""The tree stays layered and typed: import contracts (import-linter, ``[tool.importlinter]``
in pyproject.toml) hold, mypy (``[tool.mypy]``) finds nothing, and reading a sweep file
loads no process code."""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO_ROOT

BIN = Path(sys.executable).parent


def test_the_import_contracts_hold() -> None:
    done = subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_mypy_finds_no_type_errors() -> None:
    # The repo's own cache (git-ignored, where a developer's run leaves it): a warm check
    # takes ~3 s; a cold one (a fresh clone, as in CI) ~10 s of CPU, 40-50 s on 2 busy cores.
    done = subprocess.run(
        [str(BIN / "mypy"), "--cache-dir", str(REPO_ROOT / ".mypy_cache"), "batch", "run_support"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


def test_mypy_passes_with_the_dev_extra_alone(tmp_path: Path) -> None:
    # A contributor's first `mypy` after `pip install -e '.[dev]'` failed on the missing
    # dask and dask_jobqueue. An interpreter whose site-packages are this one's but for
    # the optional extras' packages stands for that install, without a pip run.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = tmp_path / "v" / "bin" / "python"
    (site_dir,) = json.loads(
        subprocess.run(
            [str(python), "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    (ours,) = [Path(p) for p in site.getsitepackages() if Path(p).name == "site-packages"]
    extras = ("dask", "distributed", "redis")
    for entry in ours.iterdir():
        if not entry.name.startswith(extras):
            (Path(site_dir) / entry.name).symlink_to(entry.resolve())
    done = subprocess.run(
        [
            str(BIN / "mypy"),
            "--python-executable",
            str(python),
            "--cache-dir",
            str(tmp_path / "cache"),
            "batch",
            "run_support",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    missing = subprocess.run([str(python), "-c", "import dask"], capture_output=True, check=False)
    assert missing.returncode != 0  # the extras really are absent there
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


def test_loading_a_sweep_imports_no_asyncio_psutil_or_process_code() -> None:
    check = (
        "import sys, batch.sweep.load\n"
        "loaded = [m for m in ('asyncio', 'psutil', 'subprocess', 'batch.processes',"
        " 'batch.attempt', 'batch.execution') if m in sys.modules]\n"
        "print(loaded)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
