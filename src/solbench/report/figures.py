"""The HTML report's figures (plotly), from plain data: the roofline of a chip, SOL-score distributions, a
solution's samples, the agents' R@t ladder. Each returns a plotly Figure; ``html.py`` places them."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

#: the units drawn as compute roofs (the others are summed into a point's FLOPs but not drawn)
ROOFS = ("tensor_bf16", "tensor_fp8", "tensor_fp32", "vector_fp32")
_LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=40, b=50), height=460)


def roofline(points: list[dict[str, Any]], ceilings: dict[str, Any], title: str) -> go.Figure:
    """Arithmetic intensity (FLOP per byte) against achieved throughput (FLOP/s), log-log: each solution's and
    each baseline's time a point, the memory roof and the compute roofs (datasheet solid, calibrated dashed)."""
    fig = go.Figure()
    xs = [p["intensity"] for p in points if p["intensity"]] or [1.0]
    lo, hi = min(xs) / 4, max(xs) * 4
    for kind, dash in (("datasheet", "solid"), ("calibrated", "dash")):
        c = ceilings.get(kind)
        if not c:
            continue
        bw = c["dram_bytes_per_s"]
        for unit in ROOFS:
            rate = c["rates"].get(unit)
            if not rate:
                continue
            knee = rate / bw
            xline = [lo, max(lo, min(knee, hi)), hi]
            fig.add_trace(go.Scatter(x=xline, y=[min(x * bw, rate) for x in xline], mode="lines",
                                     line=dict(dash=dash, width=1), name=f"{unit} ({kind})", hoverinfo="name"))
    for series, symbol in (("solution", "circle"), ("baseline", "diamond-open")):
        ps = [p for p in points if p["series"] == series and p["intensity"] and p["throughput"]]
        if not ps:
            continue
        fig.add_trace(go.Scatter(
            x=[p["intensity"] for p in ps], y=[p["throughput"] for p in ps], mode="markers", name=series + "s",
            marker=dict(symbol=symbol, size=9, color=[_verdict_color(p["verdict"]) for p in ps]),
            text=[p["label"] for p in ps], hovertemplate="%{text}<extra></extra>"))
    fig.update_layout(title=title, xaxis=dict(type="log", title="arithmetic intensity (FLOP/byte)"),
                      yaxis=dict(type="log", title="achieved FLOP/s"), **_LAYOUT)
    return fig


def _verdict_color(verdict: str) -> str:
    return {"passed": "#2a9d8f", "unsupported": "#e9c46a"}.get(verdict, "#e76f51")


def distributions(rows: list[dict[str, Any]], by: str) -> go.Figure:
    """SOL scores of passed evaluations, one box per value of ``by`` (family, language, chip, source, model)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r.get("sol_score") is not None and r["verdict"] == "passed":
            for key in r.get(by) if isinstance(r.get(by), list) else [r.get(by) or "?"]:
                groups.setdefault(str(key), []).append(r["sol_score"])
    fig = go.Figure()
    for key in sorted(groups):
        fig.add_trace(go.Box(y=groups[key], name=key, boxpoints="all", jitter=0.3, pointpos=0))
    fig.update_layout(title=f"SOL score by {by}", yaxis=dict(title="SOL score", range=[0, 1.05]),
                      showlegend=False, **_LAYOUT)
    return fig


def samples(series: list[dict[str, Any]], title: str) -> go.Figure:
    """The spread of each (solution, workload)'s timed samples, and its baseline's time as a mark."""
    fig = go.Figure()
    for s in series:
        if s["samples_ms"]:
            fig.add_trace(go.Box(y=s["samples_ms"], name=s["name"], boxpoints=False))
    fig.update_layout(title=title, yaxis=dict(title="ms", type="log"), showlegend=False, **_LAYOUT)
    return fig


def ladder(rows: list[dict[str, Any]], keys: list[str]) -> go.Figure:
    """The R@t ladder per group (``R@<t>`` keys of ``agents.metrics.summarize``'s rows): the share of attempts
    that pass at least t times faster than the baseline."""
    fig = go.Figure()
    for r in rows:
        steps = [k for k in r if k.startswith("R@") and r[k] is not None]
        if steps:
            fig.add_trace(go.Bar(x=steps, y=[r[k] for k in steps], name=" / ".join(str(r.get(k)) for k in keys)))
    fig.update_layout(title="R@t: attempts that pass at least t times faster than the baseline", barmode="group",
                      yaxis=dict(title="share", range=[0, 1]), **_LAYOUT)
    return fig
