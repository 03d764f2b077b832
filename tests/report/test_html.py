"""The HTML report's sections from plain data (report/html.py), without a browser."""

import pytest

pytest.importorskip("plotly")  # the report's extra: the GPU machine lacks it

from solbench.report import html  # noqa: E402


def test_the_transfer_section_gives_lifts_help_harm_and_standing():
    rep = {"directions": {"pytorch->triton": {
        "pairs": 4, "lift_S": {"mean": 12.5, "lo": -5.0, "hi": 30.0},
        "help_harm": {"n": 4, "wins": 2, "ties": 1, "losses": 1, "help": 0.5, "harm": 0.25},
        "by_standing": {"above": {"n": 3, "wins": 2, "ties": 1, "losses": 0, "help": 2 / 3, "harm": 0.0},
                        "below": {"n": 0}}, "p_value_S": 0.31}}}
    text = html.transfer_section([rep])
    assert "+12.5" in text and "-5 to +30" in text
    assert "help 50%, harm 25% (W/T/L 2/1/1 of 4)" in text
    assert "the source above the solo" in text and "the source below" not in text  # no pairs: no row
    assert "0.31" in text and html.transfer_section([]) == ""


def test_the_leaderboard_ranks_passes_by_score_and_escapes_text():
    evs = [{"problem": "p", "solution": "<b>x</b>", "language": "triton", "hardware": "h200", "verdict": v,
            "sol_score": s, "speedup": None, "why": None} for v, s in (("incorrect_numerical", 0.0),
                                                                     ("passed", 0.4), ("passed", 0.9))]
    text = html.leaderboard(evs)
    rows = text.split("<tr data-verdict=")[1:]
    assert [r.split('"')[1] for r in rows] == ["passed", "passed", "incorrect_numerical"]
    assert 'data-value="0.9"' in rows[0] and "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
