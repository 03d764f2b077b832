"""DeepSeek-V3 grouped top-k routing (8 groups of 32 experts, 4 groups kept, top-8 experts).

  s = sigmoid(logits);  b = s + bias
  group score = sum of the 2 largest b in the group;  keep the 4 best groups
  ids = the 8 largest b among kept groups, returned in ascending id order
  w = s[ids] / sum(s[ids]) * 2.5
"""

import torch

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
SCALE = 2.5


def run(logits, e_score_correction_bias):
    f = torch.promote_types(logits.dtype, torch.float32)
    T, E = logits.shape
    s = torch.sigmoid(logits.to(f))
    b = s + e_score_correction_bias.to(f)
    gs = b.view(T, N_GROUP, E // N_GROUP).topk(2, dim=-1).values.sum(-1)
    gidx = gs.topk(TOPK_GROUP, dim=-1).indices
    gmask = torch.zeros_like(gs).scatter(1, gidx, 1.0)
    emask = gmask[:, :, None].expand(T, N_GROUP, E // N_GROUP).reshape(T, E) > 0
    masked = b.masked_fill(~emask, float("-inf"))
    ids = masked.topk(TOP_K, dim=-1).indices
    ids = torch.sort(ids, dim=-1).values
    w = s.gather(1, ids)
    w = w / w.sum(-1, keepdim=True) * SCALE
    return ids.to(torch.int32), w


TIE = 1e-5  # scores this close are a tie that other rounding may break either way (fp32 rounding is ~1e-7)


def accept(inputs, outputs, expected):
    """Another valid routing (the definition's custom_check_entrypoint), consulted when the outputs differ from
    the reference's: a kernel that computes the scores with other rounding may break a near-tie between two
    experts, or between two groups, the other way.

    Every token's ids must be distinct, ascending and in range, and the weights must follow its own ids. A token
    routed differently from the reference (at most one in a thousand) must be a valid routing within TIE: its
    experts lie in at most 4 groups that, topped up with the next best groups, rank among the 4 best by group
    score within TIE, and no expert left out of those groups scores more than TIE above one chosen. Returns None
    to accept, else why not."""
    logits, bias = inputs["logits"], inputs["e_score_correction_bias"]
    ids, w = outputs[0], outputs[1]
    ref_ids = expected[0]
    T, E = logits.shape
    per = E // N_GROUP
    s = torch.sigmoid(logits.to(torch.float64))
    b = s + bias.to(torch.float64)
    idl = ids.to(torch.int64)
    if bool(((idl < 0) | (idl >= E)).any()):
        return "expert ids out of range"
    if TOP_K > 1 and bool((idl[:, 1:] <= idl[:, :-1]).any()):
        return "a token's ids are not strictly ascending (each expert once, in id order)"
    want = s.gather(1, idl)
    want = want / want.sum(-1, keepdim=True) * SCALE
    if not torch.allclose(w.to(torch.float64), want, rtol=1e-4, atol=1e-5):
        return "the weights do not follow the chosen experts' scores"
    differ = (ids != ref_ids).any(dim=1).nonzero().flatten().tolist()
    if len(differ) > max(1, T // 1000):
        return f"{len(differ)} of {T} tokens routed differently: more than near-ties explain"
    gs = b.view(T, N_GROUP, per).topk(2, dim=-1).values.sum(-1)
    for t in differ:
        chosen = idl[t].tolist()
        used = sorted({e // per for e in chosen})
        if len(used) > TOPK_GROUP:
            return f"token {t}: experts from more than {TOPK_GROUP} groups"
        rest = sorted((g for g in range(N_GROUP) if g not in used), key=lambda g: -float(gs[t, g]))
        kept = used + rest[: TOPK_GROUP - len(used)]
        dropped = [g for g in range(N_GROUP) if g not in kept]
        if dropped and float(gs[t, kept].min()) < float(gs[t, dropped].max()) - TIE:
            return f"token {t}: a group it routes to ranks below a group it leaves out, beyond a tie"
        pool = torch.cat([torch.arange(g * per, (g + 1) * per, device=ids.device) for g in kept])
        left = pool[~torch.isin(pool, idl[t])]
        if left.numel() and float(b[t, left].max()) > float(b[t, idl[t]].min()) + TIE:
            return f"token {t}: an expert it leaves out scores above one it chose, beyond a tie"
    return None
