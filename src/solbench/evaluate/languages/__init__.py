"""Language plug-ins, one file each; ``get_language`` maps a Solution's ``spec.language`` to one."""

from solbench.errors import UserError
from solbench.evaluate.languages.base import CompileError, Language, Unsupported
from solbench.evaluate.languages.pytorch import PyTorch
from solbench.evaluate.languages.triton import Triton

LANGUAGES: dict[str, type[Language]] = {"pytorch": PyTorch, "python": PyTorch, "torch": PyTorch, "triton": Triton}


def get_language(name: str) -> Language:
    try:
        return LANGUAGES[name.lower()]()
    except KeyError:
        raise UserError(f"unsupported solution language {name!r}; supported: pytorch, triton") from None


__all__ = ["CompileError", "Language", "Unsupported", "get_language", "LANGUAGES"]
