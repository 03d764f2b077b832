"""Paged KV-cache write, in place: cache slot slot_mapping[i] (flat over pages x page_size) gets row i.

The caches are viewed as [num_pages * page_size, Hkv, D] (a view, so the write lands in the inputs) and
the new rows are copied with index_copy_. Nothing is returned; the evaluator compares the caches.
"""


def run(k, v, k_cache, v_cache, slot_mapping):
    Hkv, D = k.shape[1], k.shape[2]
    k_cache.view(-1, Hkv, D).index_copy_(0, slot_mapping, k)
    v_cache.view(-1, Hkv, D).index_copy_(0, slot_mapping, v)
