"""Starter files for a problem in any language: the language template's code blocks, the signature filled in.

A language template (``templates/languages/<language>.md``) holds a primer and one or more fenced starter
blocks; a block's info string may name its file (```` ```cpp main.cpp ````), otherwise it is the entry file
(``solution.py``). Python placeholders come from ``prompts`` (``$signature``, ``$docstring``, ``$alloc``,
``$return_line``); the C++ ones (``$cpp_signature``, ``$cpp_return``) from the definition here: tensors as
``torch::Tensor``, floating scalars as ``double``, integer scalars as ``int64_t``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solbench.agents import prompts
from solbench.agents.extract import block_name, fenced_blocks

CODE_LANGS = {"python", "py", "cpp", "c++", "cuda", "cu", ""}


def _cpp_type(spec: Any) -> str:
    if spec.shape is not None:
        return "torch::Tensor"
    return "double" if "float" in spec.dtype else "bool" if spec.dtype == "bool" else "int64_t"


def cpp_values(definition: Any, dps: bool, entry: str) -> dict[str, str]:
    args = [f"{_cpp_type(s)} {n}" for n, s in definition.inputs.items()]
    outs = list(definition.outputs)
    if dps:
        args += [f"torch::Tensor {n}" for n in outs]
        ret, back = "void", ""
    elif len(outs) == 1:
        ret, back = "torch::Tensor", f"    // return {outs[0]};"
    else:
        ret, back = "std::vector<torch::Tensor>", f"    // return {{{', '.join(outs)}}};"
    return {"cpp_signature": f"{ret} {entry}({', '.join(args)})", "cpp_return": back}


def starter_files(language: str, problem: Any, *, dps: bool = True, entry: str = "run", device: str = "cuda",
                  template_dirs: prompts.Dirs = ()) -> dict[str, str]:
    """Path -> starter source for ``language`` (a UserError where the language has no template)."""
    lang = prompts.normalise_language(language)
    known = sorted(p.stem for p in (prompts.PACKAGED_TEMPLATES / "languages").glob("*.md"))
    if lang not in known and not any((Path(d).expanduser() / "languages" / f"{lang}.md").is_file()
                                     for d in template_dirs):
        from solbench.errors import UserError

        raise UserError(f"no starter files for {language!r}: there are starters for {', '.join(known)}")
    code = prompts._code(problem.definition, dps, entry)
    values = {**code, **cpp_values(problem.definition, dps, entry), "entry": entry, "device": device,
              "language": lang}
    text = prompts.render_template(f"languages/{lang}.md", values=values, template_dirs=template_dirs)
    files: dict[str, str] = {}
    for b in fenced_blocks(text):
        if b.lang not in CODE_LANGS:
            continue
        name = block_name(b) or ("solution.py" if b.lang in ("python", "py", "") else f"main.{b.lang}")
        files[name] = b.code.replace('    """\n\n    ', '    """\n    ')
    if not files:
        from solbench.errors import UserError

        raise UserError(f"the {lang} language template has no starter code block")
    return files
