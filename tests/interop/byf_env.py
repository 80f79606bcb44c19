"""The by-framework reference venv the interoperability suite runs beside ours.

by-framework needs Python >= 3.12 while this project supports older ones, so its
pinned pre-release lives in its own venv (``.venv-byf`` at the repository root).
``make interop-venv`` runs this module; the suite's fixtures call :func:`ensure_venv`
so a plain ``pytest tests/interop`` on a fresh clone builds it too.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-byf"
PACKAGE = "by-framework[cli]==0.2.2.dev17"
MIN_VERSION = (3, 12)
_STAMP = VENV / ".installed"


def _version_ok(python: str) -> bool:
    """Whether ``python`` runs and is at least :data:`MIN_VERSION`."""
    check = f"import sys; sys.exit(0 if sys.version_info >= {MIN_VERSION!r} else 1)"
    try:
        done = subprocess.run([python, "-c", check], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_python() -> str | None:
    """A Python >= 3.12: ``BYF_PYTHON``, pyenv's versions, then ``python3.1x`` on PATH."""
    candidates: list[str] = []
    if env := os.environ.get("BYF_PYTHON"):
        candidates.append(env)
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    # Newest first, but 3.12 before 3.13+: it is the version by-framework is built for.
    found = sorted(glob.glob(f"{pyenv_root}/versions/3.1[2-9]*/bin/python3"))
    candidates += [p for p in found if "/3.12" in p] + [p for p in found if "/3.12" not in p]
    for name in ("python3.12", "python3.13", "python3.14"):
        if path := shutil.which(name):
            candidates.append(path)
    if sys.version_info >= MIN_VERSION:
        candidates.append(sys.executable)
    for candidate in candidates:
        if _version_ok(candidate):
            return candidate
    return None


def venv_python() -> Path:
    """The interpreter of the by-framework venv (may not exist yet)."""
    return VENV / "bin" / "python"


def ensure_venv() -> Path | None:
    """Create and install the venv when needed.

    Returns:
        The venv's interpreter, or ``None`` when no Python >= 3.12 exists here.

    Raises:
        RuntimeError: a Python exists but the venv could not be built (one line).
    """
    if _STAMP.exists() and _STAMP.read_text().strip() == PACKAGE and venv_python().exists():
        return venv_python()
    python = find_python()
    if python is None:
        return None
    steps = [
        [python, "-m", "venv", "--clear", str(VENV)],
        [str(venv_python()), "-m", "pip", "install", "-q", PACKAGE],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"building {VENV.name} failed ({' '.join(step[:3])}): {tail[0]}")
    _STAMP.write_text(PACKAGE + "\n")
    return venv_python()


def main() -> int:
    """``make interop-venv``: build the venv or say why it cannot be built."""
    try:
        python = ensure_venv()
    except RuntimeError as exc:
        print(f"interop-venv: {exc}", file=sys.stderr)
        return 1
    if python is None:
        print(
            "interop-venv: no Python >= 3.12 found (pyenv or python3.12 on PATH); "
            "the tests/interop suite will be skipped"
        )
        return 0
    print(f"interop-venv: {PACKAGE} ready in {VENV.name} ({python})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
