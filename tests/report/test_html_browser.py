"""The HTML report in a real headless browser (Debian's chromium through selenium): it loads with no console
error, its plots render, the leaderboard filters and sorts, and a screenshot is kept (``.artifacts/``, or
SOLBENCH_ARTIFACTS)."""

import os
import random
import shutil
from pathlib import Path

import pytest

from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.store.db import Store
from tests.paths import ROOT

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("plotly")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs chromium and chromedriver (Debian: "
                                 "apt-get install chromium chromium-driver; `make test` installs them)")]


def _evaluation(problem, solution, language, verdict, score, ms):
    rng = random.Random(hash((problem, solution)) & 0xFFFF)
    w = WorkloadResult(uuid=f"{problem}-w1", verdict=verdict, time_ms=ms, baseline_ms=ms * 1.5, baseline="compile",
                       sol_ms=ms * 0.5, bound="memory", sol_score=score, flops={"vector_fp32": 1e9},
                       bytes=4e8, samples_ms=[ms * (1 + rng.gauss(0, 0.02)) for _ in range(50)],
                       message=None if verdict == "passed" else "out: 12% of elements within tolerance")
    return Evaluation(problem=problem, problem_dir="", problem_digest="d", solution=solution, solution_digest=solution,
                      language=language, hardware="h200", device="cuda", verdict=verdict, sol_score=score,
                      workloads=[w])


@pytest.fixture
def report_file(tmp_path):
    from solbench.cli_report import gather
    from solbench.report.html import render

    db = tmp_path / "r.db"
    store = Store(db)
    rid = store.start_run("solbench run", "cuda", "h200")
    for args in (("rmsnorm", "triton", "triton", "passed", 0.81, 0.05),
                 ("rmsnorm", "cuda", "cuda_cpp", "passed", 0.62, 0.07),
                 ("layernorm", "triton", "triton", "incorrect_numerical", 0.0, 0.04),
                 ("gemm_bf16", "triton", "triton", "passed", 0.33, 1.2)):
        store.add_evaluation(_evaluation(*args), "{}", rid)
    store.finish_run(rid)
    data = gather(db, [rid], [], [])
    data["title"] = "browser test"
    page = tmp_path / "report.html"
    page.write_text(render(data))
    return page


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _rows(driver):
    from selenium.webdriver.common.by import By

    return [r for r in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr") if r.is_displayed()]


def test_the_report_loads_renders_filters_and_sorts(report_file, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(report_file.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    plots = browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
    assert len(plots) >= 3  # a roofline, the SOL scores, a problem's samples
    points = browser.find_elements(By.CSS_SELECTOR, "#roofline-0 .scatterlayer .point")
    assert len(points) >= 6  # four solutions and their baselines, drawn

    assert len(_rows(browser)) == 4
    browser.find_element(By.ID, "filter").send_keys("rmsnorm")
    assert len(_rows(browser)) == 2 and browser.find_element(By.ID, "shown").text == "2"
    browser.find_element(By.ID, "filter").clear()
    browser.find_element(By.ID, "filter").send_keys(" ")  # an input event with the box empty again
    Select(browser.find_element(By.ID, "verdict")).select_by_value("incorrect_numerical")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in _rows(browser)] == ["layernorm"]
    Select(browser.find_element(By.ID, "verdict")).select_by_value("")

    header = browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")
    score = next(h for h in header if h.text == "sol score")
    score.click()
    ascending = [float(r.find_elements(By.TAG_NAME, "td")[5].text) for r in _rows(browser)
                 if r.find_elements(By.TAG_NAME, "td")[5].text != "-"]
    score.click()
    descending = [float(r.find_elements(By.TAG_NAME, "td")[5].text) for r in _rows(browser)
                  if r.find_elements(By.TAG_NAME, "td")[5].text != "-"]
    assert ascending == sorted(ascending) and descending == sorted(ascending, reverse=True)

    keep = Path(os.environ.get("SOLBENCH_ARTIFACTS") or ROOT / ".artifacts")
    keep.mkdir(parents=True, exist_ok=True)
    shot = keep / "report-browser-test.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
