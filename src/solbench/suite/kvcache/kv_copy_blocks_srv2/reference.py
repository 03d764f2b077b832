"""Copy KV pages in place: page block_mapping[i] -> page block_mapping[P + i], in both caches."""


def run(key_cache, value_cache, block_mapping):
    P = block_mapping.shape[0] // 2
    src, dst = block_mapping[:P], block_mapping[P:]
    key_cache.index_copy_(0, dst, key_cache.index_select(0, src))
    value_cache.index_copy_(0, dst, value_cache.index_select(0, src))
