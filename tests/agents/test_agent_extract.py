"""Code extraction from model replies: fences, file names, the entry file, repeats, truncation, no code."""

import ast

from solbench.agents.extract import Extracted, extract_code, fenced_blocks

RUN = "import torch\n\n\ndef run(x, out):\n    out.copy_(x * 2)\n"


def test_single_python_block():
    reply = f"Here is my kernel.\n\n```python\n{RUN}```\n\nIt doubles x."
    got = extract_code(reply)
    assert got.ok and got.problem is None and not got.truncated
    assert got.files == {"solution.py": RUN} and got.entry_file == "solution.py"


def test_py_and_bare_fences_and_indented_fence():
    assert extract_code(f"```py\n{RUN}```").files == {"solution.py": RUN}
    assert extract_code(f"```\n{RUN}```").files == {"solution.py": RUN}  # no info string: it parses as Python
    indented = "1. The file:\n\n   ```python\n" + "".join("   " + ln + "\n" if ln else "\n" for ln in RUN.splitlines()) \
        + "   ```\n"
    assert extract_code(indented).files == {"solution.py": RUN}


def test_several_files_named_by_the_line_before():
    reply = ("Two files.\n\n# file: helpers.py\n```python\nSCALE = 2\n```\n\n**kernel.py**\n```python\n"
             "from helpers import SCALE\n\ndef run(x, out):\n    out.copy_(x * SCALE)\n```\n")
    got = extract_code(reply)
    assert set(got.files) == {"helpers.py", "kernel.py"}
    assert got.entry_file == "kernel.py" and got.files["helpers.py"] == "SCALE = 2\n"
    # other label forms: a heading, a backticked name with a colon, a sentence naming one file
    for label in ("### kernel.py", "`kernel.py`:", "File: kernel.py", "Here is the updated `kernel.py`:"):
        assert extract_code(f"{label}\n```python\n{RUN}```").files == {"kernel.py": RUN}, label


def test_info_string_filenames():
    for info in ("python title=kernel.py", 'python title="kernel.py"', "python kernel.py", "kernel.py",
                 'py filename=kernel.py', "{.python file=kernel.py}", "python:kernel.py"):
        got = extract_code(f"```{info}\n{RUN}```")
        assert got.files == {"kernel.py": RUN} and got.entry_file == "kernel.py", info


def test_first_line_comment_names_the_file():
    code = "# file: kernel.py\n" + RUN
    assert extract_code(f"```python\n{code}```").files == {"kernel.py": code}


def test_tilde_fences_and_longer_fences():
    assert extract_code(f"~~~python\n{RUN}~~~\n").files == {"solution.py": RUN}
    inner = 'DOC = """\n```\nnot a fence end\n```\n"""\n' + RUN
    got = extract_code(f"````python\n{inner}````\n")
    assert got.files == {"solution.py": inner}


def test_repeated_blocks_the_last_complete_one_wins():
    first, second = RUN, RUN.replace("x * 2", "x + x")
    reply = f"Draft:\n```python\n{first}```\nWait, better:\n```python\n{second}```\nDone."
    got = extract_code(reply)
    assert got.files == {"solution.py": second}
    # an unnamed revision after a named entry file revises that file
    got = extract_code(f"**kernel.py**\n```python\n{first}```\nFixed:\n```python\n{second}```")
    assert got.files == {"kernel.py": second} and got.entry_file == "kernel.py"
    # a named version after an unnamed one replaces it rather than leaving two entry files
    got = extract_code(f"```python\n{first}```\n# file: kernel.py\n```python\n{second}```")
    assert got.files == {"kernel.py": second} and got.entry_file == "kernel.py"


def test_entry_file_is_the_one_defining_run_among_snippets_and_other_languages():
    reply = ("Usage:\n```bash\npython bench.py\n```\nA helper idea:\n```python\nx = torch.ones(3)\n```\n"
             "The error I saw:\n```\nTraceback (most recent call last):\n  File \"k.py\", line 3\n```\n"
             f"Solution:\n```python\n{RUN}```\n")
    got = extract_code(reply)
    assert got.files == {"solution.py": RUN} and got.entry_file == "solution.py"


def test_custom_entry_name_and_kernelbench_class():
    code = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    assert extract_code(f"```python\n{code}```", entry=("run", "ModelNew")).entry_file == "solution.py"
    got = extract_code(f"```python\n{code}```")
    assert not got.ok and "`run`" in got.problem and got.files == {"solution.py": code}


def test_no_code_at_all():
    for reply in ("I am not sure how to write this kernel.", "", None):
        got = extract_code(reply)
        assert isinstance(got, Extracted) and not got.ok
        assert got.files == {} and got.entry_file is None and got.problem
    assert "no code block" in extract_code("Let me think about tiling first.").problem
    only_shell = extract_code("```bash\npip install triton\n```")
    assert not only_shell.ok and only_shell.files == {} and only_shell.problem


def test_unfenced_code_is_taken_when_it_parses_and_defines_run():
    got = extract_code(RUN)
    assert got.ok and got.files == {"solution.py": RUN}


def test_truncated_but_parseable():
    reply = f"Here it is:\n```python\n{RUN}"  # the reply stops before the closing fence
    got = extract_code(reply)
    assert got.ok and got.truncated and got.files == {"solution.py": RUN}
    ast.parse(got.files["solution.py"])


def test_truncated_and_unparseable():
    cut = RUN + "\n\ndef helper(a, b\n"
    got = extract_code(f"```python\n{cut}")
    assert not got.ok and got.truncated and got.entry_file is None
    assert "cut off" in got.problem
    # an earlier complete version still counts: the cut-off repeat is not complete, so it does not win
    got = extract_code(f"```python\n{RUN}```\nNow a faster one:\n```python\n{cut}")
    assert got.ok and got.truncated and got.files == {"solution.py": RUN}


def test_syntax_errors_in_complete_blocks_are_left_to_the_grader():
    broken = "def run(x, out)\n    out.copy_(x)\n"  # missing colon: the build step reports it
    got = extract_code(f"```python\n{broken}```")
    assert got.ok and got.files == {"solution.py": broken}


def test_file_names_stay_inside_the_solution():
    got = extract_code(f"```python title=../../etc/kernel.py\n{RUN}```")
    assert got.files == {"kernel.py": RUN}


def test_fenced_blocks_reports_closed_and_info():
    blocks = fenced_blocks("a\n```python x.py\nprint(1)\n```\ntext\n~~~\nopen")
    assert [(b.lang, b.closed) for b in blocks] == [("python", True), ("", False)]
    assert blocks[0].info == "python x.py" and blocks[0].before == "a" and blocks[1].code == "open\n"
