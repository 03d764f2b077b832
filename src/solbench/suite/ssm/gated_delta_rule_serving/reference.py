"""Gated delta rule (Gated DeltaNet, as in Qwen3-Next's linear attention), chunked form with a carried state.

Recurrence per (batch, value head), state S in R^{dk x dv}, q and k L2-normalized, q scaled by dk^-0.5:

  S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,      o_t = S_t^T q_t

Within a chunk of C tokens starting from state S0, with G_t = sum_{s <= t} g_s (inside the chunk) and
D[t, s] = exp(G_t - G_s) for s <= t (0 above the diagonal), the state after token t is
S_t = exp(G_t) S0 + sum_{s <= t} D[t, s] k_s u_s^T, where the pseudo-values u solve the unit lower-
triangular system

  u_t + beta_t sum_{s < t} D[t, s] (k_t . k_s) u_s = beta_t (v_t - exp(G_t) S0^T k_t)

i.e. U = Wv - Wk S0 with Wv = T^-1 diag(beta) V and Wk = T^-1 diag(beta exp(G)) K. Then
O = diag(exp(G)) Q S0 + (D * Q K^T) U and the state leaving the chunk is exp(G_C) S0 + K^T diag(D[C, :]) U.
Wv, Wk and the in-chunk matrices are computed for all chunks at once; only the short loop over chunks
(L / 64 steps, a Python loop over shapes, not data) carries the state. Padding at the end uses g = 0,
beta = 0 and zero q, k, v, which leaves the state unchanged. fp32 math (float64 for the anchor).
"""

import torch
import torch.nn.functional as F

CHUNK = 64


def _l2norm(x):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def run(q, k, v, g, beta, initial_state):
    B, L, Hk, dk = q.shape
    Hv, dv = v.shape[2], v.shape[3]
    R = Hv // Hk
    f = torch.promote_types(q.dtype, torch.float32)
    C = min(CHUNK, L)
    n = -(-L // C)
    pad = n * C - L

    def heads(x):  # [B, L, Hk, d] -> [B, L, Hv, d]: value head h uses key head h // R
        return x[:, :, :, None, :].expand(B, L, Hk, R, x.shape[-1]).reshape(B, L, Hv, x.shape[-1])

    def chunks(x):  # [B, L, Hv, d] -> [B, Hv, n, C, d]
        return F.pad(x, (0, 0, 0, 0, 0, pad)).reshape(B, n, C, Hv, x.shape[-1]).permute(0, 3, 1, 2, 4)

    qc = chunks(heads(_l2norm(q.to(f)) * dk ** -0.5))
    kc = chunks(heads(_l2norm(k.to(f))))
    vc = chunks(v.to(f))
    gc = F.pad(g.to(f), (0, 0, 0, pad)).reshape(B, n, C, Hv).permute(0, 3, 1, 2)      # [B, Hv, n, C]
    bc = F.pad(beta.to(f), (0, 0, 0, pad)).reshape(B, n, C, Hv).permute(0, 3, 1, 2)

    G = torch.cumsum(gc, dim=-1)                                                       # [B, Hv, n, C]
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(diagonal=-1)
    Dm = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~incl, float("-inf")))   # [B, Hv, n, C, C]
    kk = torch.matmul(kc, kc.transpose(-1, -2))
    A = (kk * Dm).masked_fill(~strict, 0.0) * bc[..., :, None]
    Tm = A + torch.eye(C, dtype=f, device=q.device)
    Wv = torch.linalg.solve_triangular(Tm, bc[..., None] * vc, upper=False, unitriangular=True)                 # [.., C, dv]
    Wk = torch.linalg.solve_triangular(Tm, (bc * torch.exp(G))[..., None] * kc, upper=False, unitriangular=True)  # [.., C, dk]
    QK = torch.matmul(qc, kc.transpose(-1, -2)) * Dm                                   # [.., C, C], zero above the diagonal
    gq = torch.exp(G)[..., None] * qc                                                  # [.., C, dk]
    last = G[..., -1]                                                                  # [B, Hv, n]
    kdec = (torch.exp(last[..., None] - G)[..., None] * kc).transpose(-1, -2)          # [.., dk, C]
    decay = torch.exp(last)

    S = initial_state.to(f)                                                            # [B, Hv, dk, dv]
    outs = []
    for c in range(n):
        U = Wv[:, :, c] - torch.matmul(Wk[:, :, c], S)                                 # [B, Hv, C, dv]
        outs.append(torch.matmul(gq[:, :, c], S) + torch.matmul(QK[:, :, c], U))
        S = decay[:, :, c, None, None] * S + torch.matmul(kdec[:, :, c], U)
    o = torch.stack(outs, dim=2)                                                       # [B, Hv, n, C, dv]
    o = o.permute(0, 2, 3, 1, 4).reshape(B, n * C, Hv, dv)[:, :L]
    return o.to(q.dtype), S.to(initial_state.dtype)
