"""The suite's counted work against what its inputs imply, and its workload labels against its axes.

Each bound fix of issue 12 (section 4) is checked two ways: the counted bytes/FLOPs equal their closed form at the
public and held-out shapes, and they stay at or below the work that the inputs actually drawn imply (distinct
pages, distinct rows, sectors touched, valid rows, accepted drafts). The label check reads every workload's label
and uuid for numbers that name an axis or a size and compares them with the workload's axes and tensor sizes.
"""

import dataclasses
import math
import re
import statistics

import pytest
import torch

from solbench.analysis.heldout import draw_heldout
from solbench.analysis.roofline import count_work, sol_time
from solbench.hardware.registry import get_hardware
from solbench.problems.inputs import PROBABILITY_SHARPNESS, make_inputs, random_tensor
from solbench.problems.roles import torch_dtype
from solbench.problems.modules import entry, module_from_source
from solbench.problems.problem import load_problem
from solbench.problems.suite import all_problems

H200 = get_hardware("h200").ceilings(scale_to_max_clock=True)
CPU = torch.device("cpu")


def _cases(name, heldout=2, device="cuda"):
    """(problem, workload, axes) for the public workloads and a few held-out shapes."""
    p = load_problem(name)
    ws = list(p.workloads) + draw_heldout(p, heldout, seed=12, device=device)
    return p, [(w, p.definition.resolve_axes(w.axes)) for w in ws]


def _draw(p, axes, name, seed):
    """One input as the evaluator draws it (its role and range), without drawing the workload's other tensors."""
    spec = p.definition.inputs[name]
    gen = torch.Generator().manual_seed(seed)
    return random_tensor(name, spec, p.definition.shape_of(spec, axes), axes, gen, CPU, seed)


# ---- 1. block tables: no page read twice --------------------------------------------------------------------
PAGED = {"paged_decode_attention_serving": "B", "chunked_prefill_paged_srv": "batch"}


def test_block_table_role_is_a_permutation_of_the_pool_split_into_rows():
    p = load_problem("paged_decode_attention_serving")
    axes = p.definition.resolve_axes({"B": 32, "Hq": 32, "page_size": 16, "max_pages": 256, "num_pages": 16384})
    a, b, c = (_draw(p, axes, "block_table", s) for s in (5, 5, 6))
    assert a.dtype == torch.int32 and a.shape == (32, 256) and a.equal(b) and not a.equal(c)
    assert a.unique().numel() == a.numel() and int(a.min()) >= 0 and int(a.max()) < 16384
    with pytest.raises(ValueError, match="distinct pages"):
        _draw(p, dict(axes, num_pages=8191), "block_table", 5)
    # the old draw (page_table: rows independent) shares about a fifth of the pages between sequences
    spec = p.definition.inputs["block_table"].model_copy(update={"role": "page_table"})
    old = random_tensor("block_table", spec, (32, 256), axes, torch.Generator().manual_seed(5), CPU, 5)
    assert old.unique().numel() < 0.85 * old.numel()


@pytest.mark.parametrize("name", sorted(PAGED))
def test_paged_attention_counts_distinct_pages_it_reads(name):
    p, cases = _cases(name, heldout=3)
    batch = PAGED[name]
    lens_name = "seq_lens" if "seq_lens" in p.definition.inputs else "prefix_lens"
    for w, ax in cases:
        assert ax["num_pages"] >= ax[batch] * ax["max_pages"]
        lmin = (ax["max_pages"] - 1) * ax["page_size"] + 1
        kv = 2 * 2 * ax[batch] * lmin * ax["Hkv"] * ax["D"]
        if name == "paged_decode_attention_serving":
            rest = 2 * 2 * ax["B"] * ax["Hq"] * ax["D"] + 4 * ax["B"] * ax["max_pages"] + 4 * ax["B"]
        else:
            rest = (2 * ax["batch"] * ax["C"] * ax["D"] * (2 * ax["Hq"] + 2 * ax["Hkv"])
                    + 4 * ax["batch"] * ax["max_pages"] + 4 * ax["batch"])
        work = count_work(p, w)
        assert work.bytes == kv + rest
        table, lens = _draw(p, ax, "block_table", 3), _draw(p, ax, lens_name, 3)
        used = [table[b, : -(-int(n) // ax["page_size"])] for b, n in enumerate(lens)]
        assert torch.cat(used).unique().numel() == sum(u.numel() for u in used)  # every page read is distinct
        implied = 2 * 2 * int(lens.sum()) * ax["Hkv"] * ax["D"] + rest
        assert work.bytes <= implied


# ---- 2. distinct rows of a gather -------------------------------------------------------------------------
def _distinct_bound(n, v):
    """Mean and variance of the distinct values among n uniform draws from v (occupied bins)."""
    e = v * (1 - (1 - 1 / v) ** n)
    var = v * (v - 1) * (1 - 2 / v) ** n + v * (1 - 1 / v) ** n - v * v * (1 - 1 / v) ** (2 * n)
    return e, var


@pytest.mark.parametrize("name", ["index_select_gather_aten", "embedding_lookup_aten"])
def test_gathers_count_the_distinct_rows_every_draw_reads(name):
    p, cases = _cases(name, heldout=3)
    for w, ax in cases:
        if name == "index_select_gather_aten":
            seqs, n, v, width, idx = ax["B"], ax["K"], ax["S"], ax["D"], "index"
        else:
            seqs, n, v, width, idx = 1, ax["T"], ax["V"], ax["H"], "ids"
        e, var = _distinct_bound(n, v)
        rows = max(seqs, seqs * e - 5 * math.sqrt(max(0.0, seqs * var)))
        work = count_work(p, w)
        assert work.bytes == pytest.approx(8 * seqs * n + 2 * width * rows + 2 * seqs * n * width, rel=1e-12)
        if seqs * n >= 1000:  # within 1% of the expected traffic wherever the gather is large
            assert work.bytes >= 0.99 * (8 * seqs * n + 2 * width * seqs * e + 2 * seqs * n * width)
        for seed in range(4):
            drawn = _draw(p, ax, idx, seed).reshape(seqs, n)
            distinct = sum(r.unique().numel() for r in drawn)
            assert rows <= distinct
        if n >= v // 4:  # where repeats are common, one read per index (the traced count) over-counts
            assert distinct < 0.97 * seqs * n


# ---- 3. spec decode, fp8 kv decode, masked MoE, top-k softmax backward ------------------------------------
def _accept_rate(s):
    """P(u <= p_t / p_d) for the probability role: both softmax(s x normal), so p_t / p_d ~ exp(s sqrt2 N(0, 1))."""
    sig = s * math.sqrt(2)
    return 0.5 + math.exp(sig * sig / 2) * 0.5 * math.erfc(sig / math.sqrt(2))


def test_spec_decode_counts_two_rows_for_requests_that_accept_every_draft():
    assert 0.808 >= _accept_rate(PROBABILITY_SHARPNESS[0]) > 0.80  # the override's constant, from the inputs' sharpness
    p, cases = _cases("spec_decode_rejection_sample_srv2", heldout=2)
    run = entry(module_from_source(p.reference_source, "spec_ref"), "run")
    for w, ax in cases:
        B, K, V = ax["B"], ax["K"], ax["V"]
        P = 0.808 ** K
        allacc = min(B, B * P + 2 * math.sqrt(B * P * (1 - P)))
        work = count_work(p, w)
        assert work.bytes == pytest.approx(4 * V * (3 * B - allacc) + 20 * B + B * (8 * (K + 1) + 4), rel=1e-12)
        if w.device == "cpu" or B < 16:
            continue
        small = w.model_copy(update={"axes": dict(w.axes, V=4096)})  # the acceptance does not depend on V
        implied = []
        for seed in range(10):  # the timing's fewest samples, each a fresh draw
            _, n = run(*make_inputs(p.definition, small, seed, "cpu"))
            implied.append(4 * V * (3 * B - int((n == K).sum())) + 20 * B + B * (8 * (K + 1) + 4))
        assert work.bytes <= statistics.median(implied) < 4 * V * 3 * B  # the old count, 3 rows each, was above


def test_fp8_kv_decode_counts_p_v_once_and_stays_memory_bound_at_wide_groups():
    p = load_problem("fp8_kv_decode_attention_srv2")
    sol = p.definition.sol.model_copy(update={"flops": {"tensor_bf16": p.definition.sol.flops["tensor_bf16"]}})
    traced = dataclasses.replace(p, definition=p.definition.model_copy(update={"sol": sol}))  # the old override
    shapes = [w.axes for w in p.workloads] + [w.axes for w in draw_heldout(p, 3, seed=12, device="cuda")] + [
        {"B": 7, "Hq": 112, "Hkv": 7, "S": 20863}, {"B": 3, "Hq": 128, "Hkv": 4, "S": 9001},
        {"B": 5, "Hq": 128, "Hkv": 1, "S": 30001}]
    for axes in shapes:
        w = p.workloads[0].model_copy(update={"axes": axes})
        ax = p.definition.resolve_axes(axes)
        work = count_work(p, w)
        scores = ax["B"] * ax["Hq"] * ax["S"]
        assert work.flops["vector_fp32"] == 4 * scores and work.flops["tensor_bf16"] == 4 * scores * ax["D"]
        assert not work.flops.get("matmul_fp32")  # the fp32 einsums are the bf16 products, not more work
        kv = 2 * ax["B"] * ax["S"] * ax["Hkv"] * ax["D"]
        assert work.bytes == kv + 2 * 2 * ax["B"] * ax["Hq"] * ax["D"] + 2 * 4 * ax["Hkv"]
        sol = sol_time(work, H200)
        if ax["Hq"] // ax["Hkv"] <= 32:  # every public and held-out group size: the KV cache's read binds
            assert sol.bound in ("memory", "latency")
        if ax["Hq"] // ax["Hkv"] >= 128:  # the old count kept the fp32 einsums beside the tensor count
            assert sol_time(count_work(traced, w), H200).sol_s > 1.2 * sol.sol_s


def test_masked_moe_counts_the_valid_rows_of_the_timing_draws():
    p, cases = _cases("moe_masked_expert_ffn_srv2", heldout=3)
    for w, ax in cases:
        E, C, H, I = ax["E"], ax["C"], ax["H"], ax["I"]
        rows = max(E, E * (C + 1) / 2 - 2 * math.sqrt(E * (C * C - 1) / 12))
        work = count_work(p, w)
        assert work.flops["tensor_bf16"] == pytest.approx(6 * H * I * rows, rel=1e-12)
        assert work.bytes == pytest.approx(E * 3 * I * H * 2 + rows * (H * 2 + 4) + E * C * H * 2 + E * 4, rel=1e-12)
        drawn = [int(_draw(p, ax, "masked_m", seed).sum()) for seed in range(30)]
        for start in range(0, 30, 10):  # the median of each 10 draws does at least the counted rows
            assert rows <= statistics.median(drawn[start:start + 10])
        if E >= 8 and C >= 64:
            assert rows >= 0.55 * E * (C + 1) / 2  # not the one row per expert counted before
    mixtral = next(w for w, _ in cases if "mixtral-8x7b-prefill" in w.uuid)
    assert sol_time(count_work(p, mixtral), H200).bound == "tensor"


def _sectors_read(ids, E):
    """Distinct 32-byte sectors of a [T, E] fp32 tensor holding the selected elements."""
    flat = torch.arange(ids.shape[0])[:, None] * E + ids.long()
    return 32 * (flat // 8).unique().numel()


def test_topk_softmax_bwd_counts_gathered_logits_by_sector():
    p, cases = _cases("moe_topk_softmax_bwd", heldout=3)
    for w, ax in cases:
        T, E, k = ax["T"], ax["E"], ax["k"]
        miss = (1 - 8 / E) ** k if E % 8 == 0 else (1 - 4 / E) ** (2 * k)  # a sector holds no selected logit
        gating = 4 * T * E if E <= 4 else max(4 * T * k, 32 * (T * E // 8) * (1 - miss))
        work = count_work(p, w)
        assert work.bytes == pytest.approx(gating + 8 * T * k + 4 * T * E, rel=1e-12)
        rows = min(T, 16384)  # rows are drawn independently: the first 16384 tell the rate per row
        sectors = _sectors_read(_draw(p, dict(ax, T=rows), "topk_ids", 4), E)
        assert gating * rows / T <= sectors
        if T >= 1024:
            assert gating * rows / T >= (0.95 if E % 8 == 0 else 0.9) * sectors  # tight, aligned rows tighter
            if E >= 64:
                assert 4 * rows * k < 0.5 * sectors  # the traced 4 bytes per logit was well under


# ---- 4. labels --------------------------------------------------------------------------------------------
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB)\b(?:\s+(of\s+[\w,/ ]+?(?=[);]|$)|in\b(?! and)|out\b))?")
UNIT = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
ASSIGN = re.compile(r"(?<![\w.-])([A-Za-z_]\w*)\s*=\s*(\d+)(?![\w.])")
CACHE_CLAIM = re.compile(r"\b(L2|LLC)\b|resident|cache[- ]hot|hot[- ]cache|warm[- ]cache|fits in (the )?cache", re.I)
BATCHLIKE = ("B", "batch", "BATCH", "T", "M", "num_tokens")


def _strip_models(text, definition):
    """Model names (the definition's model tags, also without dots or hyphens) are not axis claims."""
    names = set()
    for m in definition.tag_value("model"):
        names |= {m, m.replace(".", ""), m.replace(".", "").replace("-", "")}
    for m in sorted(names, key=len, reverse=True):
        text = re.sub(re.escape(m), " ", text, flags=re.I)
    return text


def _tensors(definition, axes):
    """name -> (bytes, role, axis values of its shape); role "in", "out" or "both" (an in-place input)"""
    out = {}
    for io, specs in (("in", definition.inputs), ("out", definition.outputs)):
        for n, s in specs.items():
            if s.shape is not None:
                size = torch.empty((), dtype=torch_dtype(s.dtype)).element_size()
                role = "both" if n in definition.inplace_inputs else io
                out[n] = (math.prod(axes[a] for a in s.shape) * size, role, [axes[a] for a in s.shape])
    return out


def _gathered(t, axes):
    """A tensor and the parts of it a call may touch: one axis swapped for a smaller one (slots, pages)."""
    return {t[0]} | {t[0] * b / a for a in t[2] for b in axes.values() if 0 < b < a}


def _names(word, tensor):
    """Whether a label's word names a tensor: its name or a part of it, or the same stem ("probabilities")."""
    parts = tensor.lower().split("_")
    return word.lower() in (tensor.lower(), *parts) or any(len(p) >= 4 and word.lower()[:4] == p[:4] for p in parts)


def _size_candidates(tensors, which, axes, work_bytes):
    """Sizes a label may state: one tensor (or the part of it a call touches), the inputs, the outputs, all of
    them, the tensors its words name, or the counted work; where every word names a tensor ("of q, k, v, out"),
    exactly their sum."""
    if isinstance(which, set):
        named = [t for n, t in tensors.items() if n in which]
        return {sum(t[0] for t in named)} | (_gathered(named[0], axes) if len(named) == 1 else set())
    pure = [t for t in tensors.values() if t[1] == "in"]  # in-place inputs (caches) may be written only
    ins = [t for t in tensors.values() if t[1] in ("in", "both")]
    outs = [t for t in tensors.values() if t[1] in ("out", "both")]
    groups = [pure, ins] if which == "in" else [outs] if which == "out" else [pure, ins, outs, list(tensors.values())]
    if isinstance(which, list):  # words of "of ...": the tensors they name ("probabilities": the *_probs)
        groups.append([t for n, t in tensors.items() if any(_names(w, n) for w in which)])
    out = {sum(t[0] for t in g) for g in groups}
    out |= {x for g in groups for t in g for x in _gathered(t, axes)}
    return out | ({work_bytes} if which not in ("in", "out") and work_bytes else set())


def label_mismatches(problem, workload):
    d = problem.definition
    axes = d.resolve_axes(workload.axes)
    label = workload.label or ""
    text = _strip_models(label, d)
    wrong = []
    if CACHE_CLAIM.search(label):
        wrong.append("claims cache residency (every timed call follows a cache flush)")
    tensors = _tensors(d, axes)
    work_bytes = None
    for m in SIZE.finditer(text):
        val, digits = float(m.group(1)) * UNIT[m.group(2)], len((m.group(1) + ".").split(".")[1])
        qual = (m.group(3) or "").strip()
        names = set(re.split(r"[,/ ]+|\band\b", qual[3:])) - {""} if qual.startswith("of ") else set()
        which = (names if names and names <= tensors.keys() else qual if qual in ("in", "out")
                 else sorted(names) if names else None)
        slack = 0.5 * 10 ** -digits * UNIT[m.group(2)]
        for attempt in range(2):  # the counted work only when no tensor size matches (tracing takes a while)
            if any(abs(val - c) <= 0.06 * c + slack for c in _size_candidates(tensors, which, axes, work_bytes)):
                break
            if attempt == 0 and work_bytes is None:
                try:
                    work_bytes = count_work(problem, workload).bytes
                except Exception:
                    work_bytes = 0
                continue
            wrong.append(f"{m.group(0)!r} matches no tensor size")
            break
    tops = [int(x) for x in re.findall(r"top-(\d+)", text)]
    for name, num in ASSIGN.findall(text):
        n, lower = int(num), {a.lower(): a for a in axes}
        if name in axes or name.lower() in lower:
            ok = axes.get(name, axes.get(lower.get(name.lower()))) == n
        elif name == "bs":
            batch = [axes[a] for a in BATCHLIKE if a in axes]
            ok = (n in batch or (not batch and n == 1)
                  or any(n * t == b * v for t in tops for b in batch for v in [1, *axes.values()]))
        else:
            ok = n in axes.values()
        if not ok:
            wrong.append(f"{name}={num} disagrees with the axes")
    for tok in re.split(r"[-_\s(),]+", _strip_models(workload.uuid, d) + " " + text):
        m = re.fullmatch(r"([a-z])(\d+)", tok)  # "b4", "l8192", "t16384": an axis by its initial
        if not m:
            continue
        n = int(m.group(2))
        named = [a for a in axes if any(part.lower().startswith(m.group(1)) for part in a.split("_")
                                        if part not in ("size", "num", "max"))]
        # the axis itself, or the product of two such axes ("p8192": max_pages 256 of page_size 32)
        if named and not any(axes[a] * v == n for a in named for v in [1, *(axes[b] for b in named if b != a)]):
            wrong.append(f"{tok!r} disagrees with the axes")
    return wrong


def test_label_check_finds_mismatches_and_leaves_model_names_alone():
    p = load_problem("softcap_attention_srv")
    w = next(w for w in p.workloads if w.uuid.endswith("b4-l4096"))
    assert label_mismatches(p, w) == []
    assert label_mismatches(p, w.model_copy(update={"label": "gemma-2-9b prefill (805 MB of q, k, v, out)"}))
    assert label_mismatches(p, w.model_copy(update={"label": "4 x 4096 tokens (403 MB, L2 resident)"}))
    assert label_mismatches(p, w.model_copy(update={"uuid": "softcap-b4-l8192"}))
    g = load_problem("gemm_bf16")
    w = next(w for w in g.workloads if w.axes.get("M") == 16)
    assert label_mismatches(g, w) == []
    assert label_mismatches(g, w.model_copy(update={"label": "llama-3.1-8b decode bs=32, gate/up proj"}))
    assert label_mismatches(g, w.model_copy(update={"label": "tiny (M=13)"}))
    q = load_problem("moe_topk_softmax")
    for w in q.workloads:  # qwen3-30b-a3b, llama31-8b, deepseek-v3: model names, not axes
        assert label_mismatches(q, w.model_copy(update={"uuid": w.uuid + "-qwen3-30b-a3b"})) == []


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.name)
def test_workload_labels_agree_with_their_axes(problem):
    wrong = {w.uuid: label_mismatches(problem, w) for w in problem.workloads}
    assert {u: m for u, m in wrong.items() if m} == {}
