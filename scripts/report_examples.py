"""The example reports under docs/report/ (linked from the README):

- ``h200-starter.html``: every starter example on the H200, from a database `scripts/gpu-check.sh run` returned
  (``--gpu-db``, its runs ``--runs``);
- ``agents-loopback.html``: an agent attempt and a skill-transfer experiment on rmsnorm (PyTorch and Triton),
  graded by the real evaluator on this machine's CPU, the model a scripted loopback server (tests/agents).

Then a screenshot of each page in headless chromium.

    python scripts/report_examples.py --gpu-db gpu.db --runs 1 2 --out docs/report
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PYTORCH = """import torch


def run(x, weight, eps, out):
    xf = x.float()
    out.copy_((xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype))
"""
SKILL = "```markdown\n# SKILL\n- rmsnorm is one pass over each row: statistics in fp32, one rounding at the end\n```"


def solbench(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "solbench", *args], check=True, stdin=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))


def agents_db(work: Path) -> tuple[Path, Path]:
    from tests.agents.agents_loopback import LoopbackServer, language_model

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_agent_loop import GPU_KERNEL  # its Triton rmsnorm, which the CPU runs through Triton's interpreter

    db, rep = work / "agents.db", work / "transfer.json"
    with LoopbackServer(default=language_model({"triton": GPU_KERNEL, "pytorch": PYTORCH}, SKILL)) as srv:
        models = work / "models.toml"
        models.write_text(f'[models.scripted]\nprovider = "openai"\nbase_url = "{srv.openai_base_url}"\nmodel = "m"\n'
                          'max_retries = 0\nprice = { input = 1.0, cached = 0.1, output = 4.0 }\n')
        common = ("--model", "scripted", "--models", str(models), "--device", "cpu", "--heldout", "1",
                  "--turns", "3", "--submissions", "2", "--db", str(db))
        solbench("agent", "run", "--problem", "rmsnorm", "--language", "triton", "--experiment", "solo", *common)
        solbench("experiment", "transfer", "--problems", "rmsnorm", "--pair", "pytorch,triton", "--experiment",
                 "rmsnorm-transfer", "--out", str(rep), *common)
    return db, rep


def screenshot(page: Path, shot: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(page.resolve().as_uri())
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-db", type=Path, help="a database of the main job on the H200")
    ap.add_argument("--runs", nargs="*", default=[], help="its runs")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "report")
    args = ap.parse_args()
    pages = []
    if args.gpu_db:
        solbench("report", "--db", str(args.gpu_db), *[x for r in args.runs for x in ("--run", r)], "--site",
                 str(args.out), "-o", "h200-starter.html", "--title", "solbench: the starter examples on an H200")
        pages.append(args.out / "h200-starter.html")
    with tempfile.TemporaryDirectory() as work:
        db, rep = agents_db(Path(work))
        solbench("report", "--db", str(db), "--transfer", str(rep), "--site", str(args.out), "-o",
                 "agents-loopback.html", "--title", "solbench: an agent attempt and a transfer experiment (scripted "
                 "loopback model, CPU)")
    pages.append(args.out / "agents-loopback.html")
    for page in pages:
        screenshot(page, page.with_suffix(".png"))
        print(page, page.with_suffix(".png"))


if __name__ == "__main__":
    main()
