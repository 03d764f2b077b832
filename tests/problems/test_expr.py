import pytest

from solbench.expr import ExprError, evaluate, names_in


def test_arithmetic_and_names():
    assert evaluate("hidden_size // num_heads", {"hidden_size": 4096, "num_heads": 32}) == 128
    assert evaluate("2 * M * N * K", {"M": 3, "N": 5, "K": 7}) == 210
    assert evaluate("cdiv(a, 128) * 128", {"a": 129}) == 256
    assert evaluate("H_qo == H_kv * H_r", {"H_qo": 32, "H_kv": 8, "H_r": 4}) is True
    assert evaluate("x if x > 0 else -x", {"x": -3}) == 3
    assert names_in("min(a, b) + c") == {"a", "b", "c"}


@pytest.mark.parametrize("bad", ["__import__('os')", "a.b", "[1, 2]", "lambda: 1", "open('x')"])
def test_rejects_anything_but_arithmetic(bad):
    with pytest.raises(ExprError):
        evaluate(bad, {"a": 1})


def test_unknown_name():
    with pytest.raises(ExprError, match="unknown name"):
        evaluate("a + q", {"a": 1})
