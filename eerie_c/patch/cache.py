"""Row-band stages with *cached* halos: each layer's output rows are computed exactly once.

A recomputing row-band stage (patch/stage.py make_plan) gives every band the whole receptive
field of its output rows, so the rows two consecutive bands of a layer share are computed
twice (the stage's extra MACs). With full-width bands those shared rows are exactly the rows
the next layer's window still needs from the previous band (kh - sh of them, dilation and the
image's edges aside). A line-buffered camera pipeline keeps them instead, and so does this
stage:

  * the stage runs in *steps* (its "bands"): a step computes the first layer's next rows (its
    output rows split evenly over the steps), then every later layer every new row whose
    windows its input buffer now holds, at most that layer's share per step (see caps below),
    then, once the first layer is done, steps of the later layers alone until the last one is;
    each output row of each layer is computed once, and a step may compute no row of a layer
    (the C then skips its kernel);
  * patch buffer k (layer k's output) keeps, between steps, the rows layer k + 1 will read
    again: before layer k writes its new rows in a step, a memmove brings the rows from the
    first one layer k + 1 reads in that step (or, reading none, its next row) to the buffer's
    top, and the new rows go right after them, so layer k + 1 reads its input from the
    buffer's first byte;
  * a buffer that keeps rows lives through the whole stage and gets bytes of its own; one that
    never keeps a row (a 1x1 layer reads it) lives from its layer to the next within a step,
    and those share two slots by parity; the layers' kernel scratch (one kernel runs at a time)
    goes after them.

A fused residual ADD (CONV_2D_ADD, layer m reading layer j's output as its skip at its own
output rows; an ADD / SUB / MUL of two layers alike, patch/ops.py) makes buffer j a
buffer with two readers: layer j + 1's windows and layer m's skip
read. It keeps rows from the first row either still needs; it never shares bytes (it is live
from layer j to layer m within a step); layer m computes no row whose skip row layer j has not
computed; and the table gives layer m, per step, the byte in buffer j where its skip rows start.

A dilated window (dh > 1) reads kh rows dh apart, not a contiguous block; but every row the
current and later windows of layer k + 1 read lies at or below the first tap of its current
window (windows only move down), so the same rule holds: buffer k keeps the rows from that
first tap on, the rows between the taps with them (the buffer's slots are contiguous rows; a
later window reads them when sh is not a multiple of dh), and layer k + 1 computes a row once
its window's last tap, (kh - 1) dh rows below the first, is in.

The extra MACs are 0 (or fewer MACs than layer by layer, when a VALID window never reads a
row); what is paid instead is the moves and each step's calls. patch/cache_proof.py
simulates the steps row by row, independently.
"""
from __future__ import annotations

from dataclasses import dataclass

from .stage import Layer, PatchPlan, _align, _bounds, out_shift, skips_of


@dataclass(frozen=True)
class CachedBands:
    """What the C does per step ("band") and layer beyond the layer's kernel (patch/band_kernels.py
    emits exactly these numbers, patch/cache_proof.py checks them)."""
    first_rows: tuple          # per band, per layer k < n-1: the image row buffer k's first row holds
    moves: tuple               # per band, per layer k < n-1: (source byte, bytes) moved to buffer k's top
    kept_rows: tuple           # per layer k < n-1: the most rows it keeps from one band to the next
    steps: int = 0             # the steps make_cached_plan was asked for (the first layer's rows
                               # split so; the bands are these and the later layers' last steps)
    skip_offsets: tuple = ()   # per band, per layer: the byte of its skip buffer where a fused
                               # ADD's skip rows for the band start (0: no ADD or no row)

    def moved_bytes(self) -> int:
        return sum(b for band in self.moves for _, b in band)


def _reads(lay: Layer, y0: int, rows: int) -> tuple[int, int]:
    """(first, last) input row the windows of output rows y0..y0+rows-1 touch (clipped; with
    dilation the first and last taps, rows between them included)."""
    ylo = max(0, y0 * lay.sh - lay.pad_t)
    yhi = min(lay.in_h - 1, (y0 + rows - 1) * lay.sh - lay.pad_t + (lay.kh - 1) * lay.dh)
    return ylo, yhi


def _ready(lay: Layer, have: int) -> int:
    """The last output row of lay whose window touches input rows up to `have` only (all rows
    once the input is complete); -1 for none."""
    if have >= lay.in_h - 1:
        return lay.out_h - 1
    # Below the last input row the clip of _reads' last row never applies, and that row grows
    # with y: the answer is the largest y with y * sh - pad_t + (kh - 1) * dh <= have.
    return max(-1, min(lay.out_h - 1, (have + lay.pad_t - (lay.kh - 1) * lay.dh) // lay.sh))


def make_cached_plan(ops, layers: list[Layer], bands: int, kernel_scratch=None) -> PatchPlan | None:
    """A stage with cached halos whose first layer's rows are split over `bands` steps (the
    plan's grid is (all its steps, 1)), or None when it cannot run so (fewer first-layer rows
    than steps, a skip from the stage input). kernel_scratch: per layer, its kernels' scratch."""
    n = len(layers)
    skips = skips_of(ops)
    # per layer: the buffer it reads as a fused ADD's skip (tensor i is buffer i - 1), or None
    skip_buf = [None if s is None else s - 1 for s in skips]
    if -1 in skip_buf:   # a skip from the stage input: not kept here (chain_prefix has none)
        return None
    if not 2 <= bands <= layers[0].out_h:
        return None
    done = [-1] * n            # per layer: the last output row computed so far
    tiles, firsts, moves, skip_offs = [], [], [], []
    held = [None] * (n - 1)    # per buffer: (first image row, last image row) it holds
    rows_max = [0] * (n - 1)
    kept_max = [0] * (n - 1)
    # per layer, the most new rows one step computes: the first layer's rows per step over the
    # strides since it, at least 1, so that the bottom edge (where a layer's last windows
    # need fewer input rows) does not flush a burst of rows through the buffers in one step
    step0 = -(-layers[0].out_h // bands)
    caps, stride = [step0], 1
    for lay in layers[1:]:
        stride *= lay.sh
        caps.append(max(1, -(-step0 // stride)))
    firsts_rows = [rows0 for _, rows0 in _bounds(layers[0].out_h, bands)]
    while done[-1] < layers[-1].out_h - 1:
        # a step: the first layer computes its next rows, every later layer the new rows whose
        # windows its input now holds (a line-buffered pipeline), at most caps[k]; then steps
        # of the later layers alone until the last one is done
        rows0 = firsts_rows[len(tiles)] if len(tiles) < len(firsts_rows) else 0
        hi = [done[0] + rows0] + [0] * (n - 1)
        for k in range(1, n):
            hi[k] = min(_ready(layers[k], hi[k - 1]), done[k] + caps[k])
            if skip_buf[k] is not None:   # its skip rows computed (this step, or before)
                hi[k] = min(hi[k], hi[skip_buf[k]])
        if len(tiles) > 4 * layers[0].out_h + 4 * n:
            raise AssertionError("patch_cache: the steps do not finish the stage")
        regions, first, move = [], [], []
        for k in range(n):
            lo = done[k] + 1
            regions.append((lo, 0, max(hi[k] - lo + 1, 0), layers[k].out_w))
            done[k] = max(done[k], hi[k])
        for k in range(n - 1):   # buffer k keeps from the first row layer k+1 reads in this band
            # (or, computing nothing now, for its next row)
            y = regions[k + 1][0]
            need_lo = min(_reads(layers[k + 1], y, 1)[0], done[k] + 1) if y < layers[k + 1].out_h else done[k] + 1
            for m in range(k + 1, n):   # a later fused ADD reads it as its skip, at its own rows
                if skip_buf[m] == k and regions[m][0] < layers[m].out_h:
                    need_lo = min(need_lo, regions[m][0], done[k] + 1)
            if regions[k][2] > 0:   # its new rows go in, even one layer k+1 will skip
                need_lo = min(need_lo, regions[k][0])
            row_b = layers[k].out_w * layers[k].out_c
            if held[k] is None:   # band 0 (need_lo is row 0): nothing kept yet
                move.append((0, 0))
            else:
                h0, h1 = held[k]
                keep = max(h1 - need_lo + 1, 0)
                move.append(((need_lo - h0) * row_b, keep * row_b) if keep and need_lo != h0 else (0, 0))
                kept_max[k] = max(kept_max[k], keep)
            first.append(need_lo)
            held[k] = (need_lo, done[k])
            rows_max[k] = max(rows_max[k], done[k] - need_lo + 1)
        # a fused ADD's skip rows (its own output rows) in its skip buffer, whose first row
        # this band is first[j]
        skip_offs.append(tuple(0 if j is None or regions[m][2] == 0 else
                               (regions[m][0] - first[j]) * layers[j].out_w * layers[j].out_c
                               for m, j in enumerate(skip_buf)))
        tiles.append(regions)
        firsts.append(tuple(first))
        moves.append(tuple(move))
    sizes = [_align(rows_max[k] * layers[k].out_w * layers[k].out_c) for k in range(n - 1)]
    # a buffer that never keeps a row (a 1x1 layer reads it) lives only from its layer to the
    # next within a step: those share two slots by parity (k and k+1 are live together);
    # the others keep rows through the whole stage and get bytes of their own, and so does a
    # fused ADD's skip buffer (live from its layer to the ADD's within a step)
    transient = [kept_max[k] == 0 and k not in skip_buf for k in range(n - 1)]
    offsets, at = [0] * (n - 1), 0
    for k in range(n - 1):
        if not transient[k]:
            offsets[k], at = at, at + sizes[k]
    for parity in (0, 1):
        slot = max([sizes[k] for k in range(n - 1) if transient[k] and k % 2 == parity], default=0)
        for k in range(n - 1):
            if transient[k] and k % 2 == parity:
                offsets[k] = at
        at += slot
    inner = [_align(b) for b in (kernel_scratch or [0] * n)]
    total = at + max(inner)
    ks = [(at, inner[k]) for k in range(n)]
    macs = sum(lay.out_h * lay.out_w * lay.macs_per_pixel for lay in layers)
    patched = sum(t[k][2] * t[k][3] * layers[k].macs_per_pixel for t in tiles for k in range(n))
    tensors = [ops[0].inputs[0]] + [op.outputs[0] for op in ops]
    cache = CachedBands(tuple(firsts), tuple(moves), tuple(kept_max), bands, tuple(skip_offs))
    return PatchPlan(list(ops), list(layers), tensors, (len(tiles), 1), tiles, offsets, sizes, total, macs,
                     patched, shift=out_shift(layers, tiles), kernel_scratch=ks, skips=skips,
                     cache=cache)


def summary(stage: PatchPlan) -> dict:
    """What report.json / report.md show of the halo handling."""
    c = stage.cache
    if c is None:
        return {"halo": "recomputed", "extra_macs": stage.extra_macs}
    return {"halo": "cached", "kept_rows": list(c.kept_rows), "bytes_moved": c.moved_bytes(),
            "extra_macs": stage.extra_macs}


def describe(info: dict) -> str:
    if info.get("halo") == "cached":
        low = "".join(f"; layer {w['index']} ({w['layer']}) runs its low-scratch depthwise (no "
                      f"sign-extended rows): its kernel scratch {w['scratch_bytes'][0]:,} -> "
                      f"{w['scratch_bytes'][1]:,} B set the stage's largest, arena "
                      f"{w['arena_bytes'][0]:,} -> {w['arena_bytes'][1]:,} B, estimated growth "
                      f"{w['est_growth_percent'][0]}% -> {w['est_growth_percent'][1]}%"
                      for w in info.get("low_scratch", []))
        return (f"halo: cached {', '.join(str(k) for k in info['kept_rows'])} rows per layer "
                f"(kept between bands, {info['bytes_moved']:,} B moved per inference), no extra MACs" + low)
    return f"halo: recomputed ({info['extra_macs']:,} extra MACs)"


__all__ = ["CachedBands", "describe", "make_cached_plan", "summary"]
