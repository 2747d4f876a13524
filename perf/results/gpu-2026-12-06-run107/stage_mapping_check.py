"""CPU check of token_stage.patch's staging map (run 107): the kernel's item -> (token, piece pair,
rows) arithmetic, written out in Python, stages every key row and every query row of each block
exactly once, for every seq_len 1-32, group size 1-8, query tiles per block, head dim and rows a
thread takes (1-3); and what the host picks (tiles, warps, rows a thread, items) for the LocDiT's
shapes on a 132-multiprocessor GPU.

    python perf/results/gpu-2026-12-06-run107/stage_mapping_check.py
"""

from __future__ import annotations

TILE, STAGE_SLOTS, MMA_WARPS, MIN_WARPS, MAX_STAGE_WARPS = 16, 3, 8, 4, 10


def stage_items(seq_len: int, pair_vecs: int, query_rows: int, slots: int) -> int:
    return seq_len * pair_vecs * ((query_rows + slots) // slots)


def staged_rows(seq_len: int, group: int, tiles_per_block: int, chunk: int, pair_vecs: int, slots: int):
    """(kind, row, piece) for every piece pair the block of `chunk` stages, with repeats."""
    group_rows = group * seq_len
    tiles = (group_rows + TILE - 1) // TILE
    tile0 = chunk * tiles_per_block
    g0 = tile0 * TILE
    g_end = min(g0 + min(tiles_per_block, tiles - tile0) * TILE, group_rows)
    items = stage_items(seq_len, pair_vecs, (g_end - g0 + seq_len - 1) // seq_len, slots)
    for i in range(items):
        rest, piece = divmod(i, pair_vecs)
        slot_chunk, t = divmod(rest, seq_len)
        head0 = (g0 + seq_len - 1 - t) // seq_len
        for b in range(slots):
            slot = slot_chunk * slots + b
            g = t + (head0 + slot - 1) * seq_len
            if slot == 0:
                yield ("key", t, piece)
            elif g < g_end:
                assert g >= g0 and g % seq_len == t
                yield ("query", g - g0, piece)


def check_map() -> int:
    cases = 0
    for seq_len in range(1, 33):
        for group in range(1, 9):
            tiles = (group * seq_len + TILE - 1) // TILE
            for per in range(1, min(MMA_WARPS, tiles) + 1):
                for pair_vecs in (4, 8):
                    for slots in (1, 2, 3):
                        for chunk in range((tiles + per - 1) // per):
                            g0 = chunk * per * TILE
                            g_end = min(g0 + min(per, tiles - chunk * per) * TILE, group * seq_len)
                            got = list(staged_rows(seq_len, group, per, chunk, pair_vecs, slots))
                            want = {("key", t, p) for t in range(seq_len) for p in range(pair_vecs)}
                            want |= {("query", r, p) for r in range(g_end - g0) for p in range(pair_vecs)}
                            assert len(got) == len(set(got)) and set(got) == want, (seq_len, group, per, chunk)
                            cases += 1
    return cases


def host_choice(sequences: int, seq_len: int, q_heads: int = 16, kv_heads: int = 2, head_dim: int = 128,
                sms: int = 132) -> dict[str, int]:
    group = q_heads // kv_heads
    tiles = (group * seq_len + TILE - 1) // TILE
    per = 1
    for chunks in range((tiles + MMA_WARPS - 1) // MMA_WARPS, tiles):
        candidate = (tiles + chunks - 1) // chunks
        if sequences * kv_heads * ((tiles + candidate - 1) // candidate) >= sms:
            per = candidate
            break
    blocks = sequences * kv_heads * ((tiles + per - 1) // per)
    query_rows = (min(per * TILE, group * seq_len) + seq_len - 1) // seq_len
    pair_vecs = head_dim // 16

    def slots_for(threads: int) -> int:
        return next((s for s in (1, 2) if stage_items(seq_len, pair_vecs, query_rows, s) <= threads), STAGE_SLOTS)

    if blocks > 2 * sms:
        warps = max(per, MIN_WARPS)
        slots = slots_for(warps * 32)
    else:
        slots = slots_for(MMA_WARPS * 32)
        if stage_items(seq_len, pair_vecs, query_rows, slots) > MMA_WARPS * 32:
            slots = slots_for(MAX_STAGE_WARPS * 32)
        warps = min(max((stage_items(seq_len, pair_vecs, query_rows, slots) + 31) // 32, MMA_WARPS), MAX_STAGE_WARPS)
    return {"tiles_per_block": per, "blocks": blocks, "warps": warps, "slots": slots,
            "items": stage_items(seq_len, pair_vecs, query_rows, slots)}


if __name__ == "__main__":
    print(f"staging map: {check_map()} blocks checked, every row piece staged once")
    for sequences, seq_len in ((2, 11), (128, 11), (512, 11), (70, 16), (512, 4)):
        print(f"{sequences} sequences x {seq_len} tokens: {host_choice(sequences, seq_len)}")
