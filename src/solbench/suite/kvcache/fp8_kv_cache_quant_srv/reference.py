"""Quantize new K/V rows to fp8 (e4m3) with static per-head scales and write them into a paged fp8 cache, in place.

  k_cache[s // page_size, s % page_size, h] = e4m3(clamp(k[i, h] / k_scale[h], -448, 448))    s = slot_mapping[i]
  (the same for v with v_scale)

Math in fp32. For the evaluator's anchor the caches arrive as float64 and receive the unrounded quotients,
so the anchor is the exact value the fp8 entry approximates. Nothing is returned.
"""

import torch

FP8_MAX = 448.0


def run(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping):
    Hkv, D = k.shape[1], k.shape[2]
    f = torch.promote_types(k.dtype, torch.float32)
    kq = (k.to(f) / k_scale.to(f)[None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    vq = (v.to(f) / v_scale.to(f)[None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    _write(k_cache, slot_mapping, kq.to(k_cache.dtype), Hkv, D)
    _write(v_cache, slot_mapping, vq.to(v_cache.dtype), Hkv, D)


def _write(cache, slots, rows, Hkv, D):
    if cache.element_size() == 1:      # fp8: copy the bytes (index_copy_ has no fp8 kernel on every device)
        cache, rows = cache.view(torch.uint8), rows.view(torch.uint8)
    cache.view(-1, Hkv, D).index_copy_(0, slots, rows)
