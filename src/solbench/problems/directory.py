"""Writing a problem directory (``definition.json``, ``reference.py``, ``workload.jsonl``): what every importer
ends with (``importers``, ``kernelbench``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.errors import UserError
from solbench.problems.definition import Definition


def slug(text: str) -> str:
    """A problem or parameter name made of lowercase letters, digits and underscores."""
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "problem"


def write_problem(out_dir: Path, definition: dict[str, Any], reference: str, workloads: list[dict[str, Any]]) -> Path:
    """Validate ``definition`` and write the three files into ``out_dir``; a user's error is one line."""
    try:
        Definition.model_validate(definition)
    except ValidationError as exc:
        raise UserError(f"{definition.get('name')}: the converted definition is not valid: {exc.errors()[0]['msg']}") from None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write to {out_dir}: {exc.strerror}") from None
    (out_dir / "definition.json").write_text(json.dumps(definition, indent=2) + "\n")
    (out_dir / "reference.py").write_text(reference)
    (out_dir / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return out_dir
