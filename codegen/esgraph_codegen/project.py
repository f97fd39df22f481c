"""The project's version (VERSION) and the list of hand-written C functions (c_api/symbols.txt)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import yaml

from .model import Project


class ProjectError(Exception):
    pass


def read_project(version_file: Path, symbols_file: Optional[Path] = None,
                 header: Optional[Path] = None) -> Project:
    """Reads VERSION and, when given, the symbol list, checking it against the C header."""
    data = yaml.safe_load(version_file.read_text())
    if not isinstance(data, dict) or not re.fullmatch(r"\d+\.\d+\.\d+", str(data.get("version", ""))) \
            or not isinstance(data.get("api"), int) or data["api"] < 1:
        raise ProjectError(f"{version_file}: needs `version: X.Y.Z` and `api: N` (N >= 1)")
    symbols = []
    if symbols_file is not None:
        for n, line in enumerate(symbols_file.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r"(\d+)\s+(esg_\w+)", line)
            if not m:
                raise ProjectError(f"{symbols_file}:{n}: expected `<api version> <esg_function>`")
            symbols.append((int(m[1]), m[2]))
    if header is not None:
        declared = set(re.findall(r"ESG_API [^(;]*?\b(esg_\w+)\(", header.read_text()))
        listed = {s for _, s in symbols}
        for missing in sorted(declared - listed):
            raise ProjectError(f"{header}: `{missing}` is declared but not listed in {symbols_file} "
                               f"with the API version that added it")
        for extra in sorted(listed - declared):
            raise ProjectError(f"{symbols_file}: `{extra}` is listed but not declared in {header}")
    return Project(str(data["version"]), data["api"], tuple(symbols))
