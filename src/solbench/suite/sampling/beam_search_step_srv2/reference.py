"""Beam-search step: cumulative score of every (beam, token) pair, then the top 2W per request.

  cand[b, w, v] = beam_scores[b, w] + log_softmax(logits[b, w])[v]
  scores, flat_ids = topk(cand.reshape(B, W * V), 2W)   (descending)
"""

import torch


def run(logits, beam_scores):
    f = torch.promote_types(logits.dtype, torch.float32)
    B, W, V = logits.shape
    lp = torch.log_softmax(logits.to(f), dim=-1)
    cand = (lp + beam_scores.to(f)[..., None]).reshape(B, W * V)
    scores, ids = cand.topk(2 * W, dim=-1)
    return scores.to(torch.promote_types(beam_scores.dtype, torch.float32)), ids


#: scores closer than this (fp64) are a tie: with bf16 logits, tokens of one beam often share a logit exactly,
#: and fp32 log-softmax rounding (about 1e-6 at these magnitudes) can order near-equal candidates of two beams
#: either way
TIE = 2e-5


def accept(inputs, outputs, expected):
    """Another valid beam step (the definition's custom_check_entrypoint), consulted when the outputs differ from
    the reference's: the same scores, with tied candidates kept or ordered the other way.

    Each request's flat_ids must be distinct and in range; position by position, the candidate score each one
    selects (computed in fp64 from the inputs) must equal the one the reference's id selects within TIE, so the
    ids are the 2W best in descending order up to ties; and the returned scores must be those of the candidate's
    own ids within the fp32 tolerance. Returns None to accept, else why not."""
    logits, beam = inputs["logits"], inputs["beam_scores"]
    scores, ids = outputs[0], outputs[1]
    ref_ids = expected[1]
    B, W, V = logits.shape
    if bool(((ids < 0) | (ids >= W * V)).any()):
        return "flat_ids out of range"
    ordered = ids.sort(dim=-1).values
    if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
        return "a request keeps the same (beam, token) pair twice"
    cand = (torch.log_softmax(logits.to(torch.float64), dim=-1) + beam.to(torch.float64)[..., None]).reshape(B, W * V)
    got = cand.gather(1, ids)
    want = cand.gather(1, ref_ids.to(torch.int64))
    if not bool(((got - want).abs() <= TIE).all()):
        return "flat_ids select candidates that are not the best ones, beyond a tie"
    if not torch.allclose(scores.to(torch.float64), got, rtol=1e-4, atol=1e-5):
        return "the scores are not those of the candidate's own flat_ids"
    return None
