"""The HTML report: one self-contained file (plotly's JavaScript inlined, no server, no network) from plain data
(``cli_report.py`` gathers it): rooflines per chip, SOL-score distributions, a sortable and filterable
leaderboard, a section per problem (every workload's times, SOL, baselines, verdict, why, and the samples'
spread), the agents' metrics and ladder, and transfer experiments' lifts. ``site`` writes the same page with the
leaderboard's data as JSON beside it, a folder to publish as it is."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from solbench.report import figures

GROUPINGS = ("family", "language", "hardware", "source", "models")
_STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px;color:#222}
nav a{margin-right:12px}table{border-collapse:collapse;width:100%;font-size:13px;margin:8px 0}
th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left}th{cursor:pointer;background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}.passed{color:#1b7f6b}.failed{color:#c0392b}
.unsupported{color:#b7950b}.why{color:#666;font-size:12px}section{margin:24px 0}
.meta{color:#666;font-size:13px}details{margin:6px 0}
"""
_SCRIPT = """
(function(){
  const table = document.getElementById('leaderboard'); if(!table) return;
  const body = table.tBodies[0], filter = document.getElementById('filter');
  const verdict = document.getElementById('verdict');
  function apply(){
    const q = filter.value.toLowerCase(), v = verdict.value; let shown = 0;
    for (const row of body.rows){
      const ok = row.textContent.toLowerCase().includes(q) && (!v || row.dataset.verdict === v);
      row.style.display = ok ? '' : 'none'; shown += ok;
    }
    document.getElementById('shown').textContent = shown;
  }
  filter.addEventListener('input', apply); verdict.addEventListener('change', apply);
  table.tHead.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
    const up = th.dataset.dir !== 'asc'; th.dataset.dir = up ? 'asc' : 'desc';
    const num = th.dataset.type === 'num';
    const key = r => { const c = r.cells[i]; return num ? parseFloat(c.dataset.value ?? 'NaN') : c.textContent; };
    const rows = Array.from(body.rows).sort((a, b) => {
      const x = key(a), y = key(b);
      if (num){ const nx = isNaN(x), ny = isNaN(y); if (nx || ny) return nx - ny; return up ? x - y : y - x; }
      return up ? x.localeCompare(y) : y.localeCompare(x);
    });
    rows.forEach(r => body.appendChild(r));
  }));
  apply();
})();
"""
LEADERBOARD = (("problem", "text"), ("solution", "text"), ("language", "text"), ("hardware", "text"),
               ("verdict", "text"), ("sol_score", "num"), ("speedup", "num"), ("why", "text"))


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _figure(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def leaderboard(evaluations: list[dict[str, Any]]) -> str:
    head = "".join(f'<th data-type="{t}">{_e(k.replace("_", " "))}</th>' for k, t in LEADERBOARD)
    rows = []
    ranked = sorted(evaluations, key=lambda e: (e["verdict"] != "passed", -(e.get("sol_score") or -1)))
    for e in ranked:
        cells = []
        for key, kind in LEADERBOARD:
            v = e.get(key)
            if kind == "num":
                cells.append(f'<td class="num" data-value="{"" if v is None else v}">{_num(v)}</td>')
            elif key == "verdict":
                cells.append(f'<td class="{_css(v)}">{_e(v)}</td>')
            elif key == "problem":
                cells.append(f'<td><a href="#p-{_e(v)}">{_e(v)}</a></td>')
            else:
                cells.append(f'<td class="{"why" if key == "why" else ""}">{_e(v)}</td>')
        rows.append(f'<tr data-verdict="{_e(e["verdict"])}">{"".join(cells)}</tr>')
    verdicts = sorted({e["verdict"] for e in evaluations})
    options = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in verdicts)
    return (f'<p><input id="filter" placeholder="filter: problem, language, chip, ..." size="40"> '
            f'<select id="verdict"><option value="">every verdict</option>{options}</select> '
            f'<span class="meta"><span id="shown">{len(rows)}</span> of {len(rows)} shown; click a column to '
            f'sort</span></p><table id="leaderboard"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            '</tbody></table>')


def _css(verdict: str | None) -> str:
    return verdict if verdict in ("passed", "unsupported") else "failed"


def problem_section(name: str, evaluations: list[dict[str, Any]], index: int) -> str:
    rows, series = [], []
    for e in evaluations:
        for w in e["workloads"]:
            rows.append(
                f'<tr><td>{_e(e["solution"])} ({_e(e["language"])}, {_e(e["hardware"])})</td><td>{_e(w["uuid"])}</td>'
                f'<td class="num">{_num(w.get("time_ms"), "{:.4g}")}</td>'
                f'<td class="num">{_num(w.get("eager_ms"), "{:.4g}")}</td>'
                f'<td class="num">{_num(w.get("compile_ms"), "{:.4g}")}</td>'
                f'<td class="num">{_num(w.get("baseline_ms"), "{:.4g}")} {_e(w.get("baseline") or "")}</td>'
                f'<td class="num">{_num(w.get("sol_ms"), "{:.4g}")}</td><td>{_e(w.get("bound"))}</td>'
                f'<td class="num">{_num(w.get("sol_score"))}</td><td class="{_css(w["verdict"])}">{_e(w["verdict"])}'
                f'</td><td class="why">{_e(w.get("why") or "")}</td></tr>')
            if w.get("samples_ms"):
                series.append({"name": f'{e["solution"]} / {w["uuid"]}', "samples_ms": w["samples_ms"]})
    head = "".join(f"<th>{h}</th>" for h in ("solution", "workload", "T_k ms", "eager ms", "compile ms",
                                              "baseline ms", "T_SOL ms", "bound", "SOL", "verdict", "why"))
    plot = _figure(figures.samples(series, f"{name}: timed samples"), f"samples-{index}") if series else ""
    return (f'<section id="p-{_e(name)}"><h3>{_e(name)}</h3><table><thead><tr>{head}</tr></thead><tbody>'
            f'{"".join(rows)}</tbody></table>{plot}</section>')


def agents_section(agents: dict[str, Any]) -> str:
    rows, keys = agents["rows"], agents["keys"]
    if not rows:
        return ""
    cols = [c for c in ("n", "solved", "correct", "pass@1", "pass@5", "S", "sol", "speedup", "tokens_per_success",
                        "usd_per_success", "wall_s_per_success") if c in rows[0]]
    head = "".join(f"<th>{_e(k)}</th>" for k in [*keys, *cols])
    def cell(x: Any) -> str:
        return f'<td class="num">{_num(x, "{:.3g}") if isinstance(x, float) else _e(x)}</td>'

    body = "".join("<tr>" + "".join(f"<td>{_e(r.get(k))}</td>" for k in keys) +
                   "".join(cell(r.get(c)) for c in cols) + "</tr>" for r in rows)
    return (f'<section id="agents"><h2>Agents</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            f'</table>{_figure(figures.ladder(rows, keys), "ladder")}</section>')


def transfer_section(reports: list[dict[str, Any]]) -> str:
    """Each experiment's lifts by direction (mean and 95% interval) and its help / harm counts."""
    parts = []
    for rep in reports:
        rows = []
        for name, d in (rep.get("directions") or {}).items():
            for metric, v in d.items():
                if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
                    rows.append(f'<tr><td>{_e(name)}</td><td>{_e(metric)}</td>'
                                f'<td class="num">{_num(v["mean"], "{:+.3g}")}</td><td class="num">'
                                f'{_num(v["lo"], "{:+.3g}")} to {_num(v["hi"], "{:+.3g}")}</td></tr>')
                elif metric == "help_harm" and isinstance(v, dict):
                    rows.append(f'<tr><td>{_e(name)}</td><td>help / harm</td><td colspan="2">{_e(_hh(v))}</td></tr>')
                elif metric == "by_standing" and isinstance(v, dict):
                    rows += [f'<tr><td>{_e(name)}</td><td>help / harm, the source {_e(k)} the solo</td>'
                             f'<td colspan="2">{_e(_hh(x))}</td></tr>' for k, x in v.items() if x.get("n")]
                elif metric == "p_value_S" and v is not None:
                    rows.append(f'<tr><td>{_e(name)}</td><td>S lift: sign-flip p</td><td class="num">'
                                f'{_num(v, "{:.3g}")}</td><td></td></tr>')
        parts.append(f'<h3>{_e(rep.get("experiment") or "transfer experiment")}</h3><table><thead><tr>'
                     '<th>direction</th><th>lift</th><th>mean</th><th>95% interval</th></tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table>')
    return f'<section id="transfer"><h2>Transfer experiments</h2>{"".join(parts)}</section>' if parts else ""


def across_section(tables: list[dict[str, Any]]) -> str:
    """The same solutions across chips, the same problems across languages (``cli_compare``'s data)."""
    parts = []
    for t in tables:
        chips = t["by"] == "hardware"
        lead = ("problem", "solution") if chips else ("problem", "hardware")
        head = "".join(f"<th>{_e(h)}</th>" for h in (*lead, *t["columns"]))
        body = []
        for r in t["rows"]:
            cells = r["hardware"] if chips else r["languages"]
            first = [r["problem"], r["solution"] if chips else r["hardware"]]
            body.append("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in first) + "".join(
                f'<td class="{_css(c["verdict"])}">{_e(c["verdict"])} SOL {_num(c["sol_score"])}</td>'
                if (c := cells.get(col)) else "<td>-</td>" for col in t["columns"]) + "</tr>")
        parts.append(f'<h3>across {"chips" if chips else "languages"}</h3><table><thead><tr>{head}</tr></thead>'
                     f'<tbody>{"".join(body)}</tbody></table>')
    return f'<section id="across"><h2>Across chips and languages</h2>{"".join(parts)}</section>' if parts else ""


def _hh(v: dict[str, Any]) -> str:
    """help / harm as a reader says it: ``help 50%, harm 0% (W/T/L 1/1/0 of 2)``."""
    pct = lambda x: "-" if x is None else f"{x * 100:.0f}%"  # noqa: E731
    return (f"help {pct(v.get('help'))}, harm {pct(v.get('harm'))} (W/T/L {v.get('wins')}/{v.get('ties')}/"
            f"{v.get('losses')} of {v.get('n')})")


def render(data: dict[str, Any], plotly_src: str | None = None) -> str:
    """The whole page: plotly's JavaScript inlined, or loaded from ``plotly_src`` (a file beside it)."""
    from plotly.offline import get_plotlyjs

    script = f'<script src="{_e(plotly_src)}"></script>' if plotly_src else f"<script>{get_plotlyjs()}</script>"

    evaluations = data["evaluations"]
    rooflines = "".join(
        _figure(figures.roofline(data["points"].get(hw, []), data["ceilings"].get(hw, {}), f"roofline: {hw}"),
                f"roofline-{i}") for i, hw in enumerate(sorted(data["points"])))
    dists = "".join(_figure(figures.distributions(evaluations, by), f"dist-{by}") for by in GROUPINGS
                    if len({str(e.get(by)) for e in evaluations}) > 1 or by == "family")
    problems = sorted({e["problem"] for e in evaluations})
    sections = "".join(problem_section(p, [e for e in evaluations if e["problem"] == p], i)
                       for i, p in enumerate(problems))
    nav = ('<nav><a href="#rooflines">rooflines</a><a href="#scores">SOL scores</a>'
           '<a href="#leaderboard-section">leaderboard</a><a href="#problems">problems</a>'
           + ('<a href="#across">across chips and languages</a>' if data.get("across") else "")
           + ('<a href="#agents">agents</a>' if data.get("agents", {}).get("rows") else "")
           + ('<a href="#transfer">transfer</a>' if data.get("transfer") else "") + "</nav>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(data["title"])}</title>'
            f'<style>{_STYLE}</style>{script}</head><body>'
            f'<h1>{_e(data["title"])}</h1><p class="meta">{_e(data["subtitle"])}</p>{nav}'
            f'<section id="rooflines"><h2>Rooflines</h2>{rooflines or "<p>nothing timed</p>"}</section>'
            f'<section id="scores"><h2>SOL scores</h2>{dists}</section>'
            f'<section id="leaderboard-section"><h2>Leaderboard</h2>{leaderboard(evaluations)}</section>'
            f'<section id="problems"><h2>Problems</h2>{sections}</section>'
            f'{across_section(data.get("across") or [])}'
            f'{agents_section(data.get("agents") or {"rows": [], "keys": []})}'
            f'{transfer_section(data.get("transfer") or [])}'
            f'<script>{_SCRIPT}</script></body></html>')


def site(data: dict[str, Any], folder: Path, page: str = "index.html") -> list[Path]:
    """A folder to publish as it is: the page, plotly's JavaScript beside it (one copy for every page of the
    folder), the leaderboard's rows and the evaluations as JSON (named after the page)."""
    from plotly.offline import get_plotlyjs

    folder.mkdir(parents=True, exist_ok=True)
    stem = "" if page == "index.html" else Path(page).stem + "-"
    js, html_file = folder / "plotly.min.js", folder / page
    board, full = folder / f"{stem}leaderboard.json", folder / f"{stem}evaluations.json"
    if not js.exists():
        js.write_text(get_plotlyjs())
    html_file.write_text(render(data, plotly_src=js.name))
    board.write_text(json.dumps([{k: e.get(k) for k, _ in LEADERBOARD} for e in data["evaluations"]], indent=1))
    full.write_text(json.dumps(data["evaluations"], indent=1, default=str))
    return [html_file, js, board, full]
