"""Causal GQA attention backward from the forward's saved out and lse, written out (no SDPA).

Per batch element b and KV head j (the G = Hq / Hkv query heads j*G .. j*G+G-1 share it):
  P[h, s, t]   = exp(scale * q[s, h] . k[t] - lse[h, s]) for t <= s, else 0
  dV[t]        = sum_{h, s} P[h, s, t] grad_out[s, h]
  dP[h, s, t]  = grad_out[s, h] . v[t]
  delta[h, s]  = grad_out[s, h] . out[s, h]
  dS           = P * (dP - delta)
  dQ[s, h]     = scale * sum_t dS[h, s, t] k[t]
  dK[t]        = scale * sum_{h, s} dS[h, s, t] q[s, h]
fp32 math (float64 for the evaluator's anchor). The loop over (b, j) keeps the score matrices at G x S x S.
"""

import math

import torch


def _acc(t):
    return torch.promote_types(t.dtype, torch.float32)


def _forward(q, k, v, scale):
    """out [B, S, Hq, D] and lse [B, Hq, S] in fp32, used only to make consistent inputs."""
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    causal = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    outs, lses = [], []
    for b in range(B):
        o_b, l_b = [], []
        for j in range(Hkv):
            qf = q[b, :, j * G:(j + 1) * G].float().permute(1, 0, 2)      # [G, S, D]
            kf = k[b, :, j].float()
            vf = v[b, :, j].float()
            s = (qf @ kf.t()) * scale
            s = s.masked_fill(~causal, float("-inf"))
            lse = torch.logsumexp(s, dim=-1)                               # [G, S]
            o_b.append((torch.exp(s - lse[..., None]) @ vf).permute(1, 0, 2))
            l_b.append(lse)
        outs.append(torch.cat(o_b, dim=1))
        lses.append(torch.cat(l_b, dim=0))
    return torch.stack(outs), torch.stack(lses)


def make_inputs(axes, device):
    B, S, Hkv, D = axes["B"], axes["S"], axes["Hkv"], axes["D"]
    Hq = axes["Hq"]
    scale = 1.0 / math.sqrt(D)
    q = torch.randn(B, S, Hq, D, device=device).to(torch.bfloat16)
    k = torch.randn(B, S, Hkv, D, device=device).to(torch.bfloat16)
    v = torch.randn(B, S, Hkv, D, device=device).to(torch.bfloat16)
    grad_out = torch.randn(B, S, Hq, D, device=device).to(torch.bfloat16)
    out, lse = _forward(q, k, v, scale)
    return {"q": q, "k": k, "v": v, "out": out.to(torch.bfloat16), "grad_out": grad_out, "lse": lse, "scale": scale}


def run(q, k, v, out, grad_out, lse, scale):
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    acc = _acc(q)
    causal = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    dq_b, dk_b, dv_b = [], [], []
    for b in range(B):
        dq_j, dk_j, dv_j = [], [], []
        for j in range(Hkv):
            heads = slice(j * G, (j + 1) * G)
            qf = q[b, :, heads].to(acc).permute(1, 0, 2)                   # [G, S, D]
            of = out[b, :, heads].to(acc).permute(1, 0, 2)
            do = grad_out[b, :, heads].to(acc).permute(1, 0, 2)
            kf = k[b, :, j].to(acc)                                        # [S, D]
            vf = v[b, :, j].to(acc)
            L = lse[b, heads].to(acc)                                      # [G, S]
            s = (qf @ kf.t()) * scale
            s = s.masked_fill(~causal, float("-inf"))
            p = torch.exp(s - L[..., None])                                # 0 above the diagonal
            dv_j.append((p.transpose(-1, -2) @ do).sum(dim=0))             # [S, D]
            dp = do @ vf.t()
            delta = (do * of).sum(dim=-1, keepdim=True)
            ds = p * (dp - delta)
            dq_j.append((ds @ kf).permute(1, 0, 2) * scale)                # [S, G, D]
            dk_j.append((ds.transpose(-1, -2) @ qf).sum(dim=0) * scale)
        dq_b.append(torch.cat(dq_j, dim=1))
        dk_b.append(torch.stack(dk_j, dim=1))
        dv_b.append(torch.stack(dv_j, dim=1))
    dt = q.dtype
    return torch.stack(dq_b).to(dt), torch.stack(dk_b).to(dt), torch.stack(dv_b).to(dt)
