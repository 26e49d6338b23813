"""Finding and running the rp tools.

Lookup order (DESIGN.md, Python): the ``RP_BIN`` folder, then ``build/bin``
beside the repository this package was imported from, then ``PATH``. The
first folder that holds the tool wins, so a developer's fresh build shadows
an installed copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

PathLike = Union[str, os.PathLike]

_REPO_BUILD_BIN = Path(__file__).resolve().parents[2] / "build" / "bin"


class ToolNotFoundError(FileNotFoundError):
    """No folder on the lookup path holds the tool."""


class ToolError(RuntimeError):
    """A tool exited with a non-zero code; ``stderr`` holds its diagnostics."""

    def __init__(self, tool: str, returncode: int, stderr: str):
        self.tool = tool
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"{tool} failed with exit code {returncode}:\n{stderr}")


def _search_dirs() -> Iterable[Path]:
    env = os.environ.get("RP_BIN")
    if env:
        yield Path(env)
    yield _REPO_BUILD_BIN


def find_tool(name: str) -> Path:
    """Returns the path of the rp tool ``name`` (for example ``rp-opt``)."""
    for folder in _search_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    searched = [str(d) for d in _search_dirs()] + ["PATH"]
    raise ToolNotFoundError(
        f"cannot find '{name}' in {', '.join(searched)}; build rp "
        f"(scripts/test.sh or ninja -C build) or set RP_BIN to its bin folder"
    )


def run_tool(
    name: str, args: Sequence[str], stdin: Optional[str] = None
) -> subprocess.CompletedProcess:
    """Runs tool ``name`` with ``args``; raises ToolError on failure."""
    tool = find_tool(name)
    proc = subprocess.run(
        [str(tool), *args], input=stdin, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ToolError(name, proc.returncode, proc.stderr)
    return proc


def opt(
    src: PathLike, passes: Sequence[str] = (), out: Optional[PathLike] = None
) -> str:
    """Runs ``rp-opt`` on the file ``src`` with ``passes`` (flag names
    without the leading ``--``) and returns the printed IR; with ``out`` the
    IR is also written there."""
    args = [str(src), *[f"--{p}" for p in passes]]
    if out is not None:
        args += ["-o", str(out)]
        run_tool("rp-opt", args)
        return Path(out).read_text()
    return run_tool("rp-opt", args).stdout
