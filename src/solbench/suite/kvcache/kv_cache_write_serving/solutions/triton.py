import triton
import triton.language as tl


@triton.jit
def _kv_cache_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, row_len, BLOCK: tl.constexpr):
    # grid: (tokens, chunks of the Hkv * D row); token i's row goes to flat cache slot slot_mapping[i]
    i = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len
    slot = tl.load(slot_ptr + i).to(tl.int64)
    src = i * row_len + cols
    dst = slot * row_len + cols
    kv = tl.load(k_ptr + src, mask=mask)
    vv = tl.load(v_ptr + src, mask=mask)
    tl.store(kc_ptr + dst, kv, mask=mask)
    tl.store(vc_ptr + dst, vv, mask=mask)


def run(k, v, k_cache, v_cache, slot_mapping):
    # in place: k_cache / v_cache are written, nothing is returned
    t = k.shape[0]
    if t == 0:
        return None
    row_len = k.shape[1] * k.shape[2]
    k = k.contiguous()
    v = v.contiguous()
    slots = slot_mapping.contiguous()
    assert k_cache.is_contiguous() and v_cache.is_contiguous()
    block = min(max(triton.next_power_of_2(row_len), 128), 2048)
    grid = (t, triton.cdiv(row_len, block))
    _kv_cache_write_kernel[grid](k, v, k_cache, v_cache, slots, row_len, BLOCK=block, num_warps=4)
    return None
