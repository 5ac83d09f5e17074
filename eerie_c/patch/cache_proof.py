"""Independent check of a row-band stage with cached halos (patch/cache.py).

patch/proof.py re-derives each layer's window geometry from its op and passes it in; this
simulates the band loop the C runs (patch/band_kernels.py: per band and layer, the move of
the kept rows into the layer's buffer, then the layer's kernel over its new rows) row by row,
with which output row of its layer each row slot of each patch buffer holds:

  * the buffers and the layers' kernel scratch lie in the scratch block, 16-byte aligned; they
    may share bytes (buffers that keep no row between bands do), so every write, move and
    kernel scratch wipes whatever rows of other buffers its bytes overlap;
  * a move copies whole rows inside its buffer (memmove: the source rows beyond the copied
    range stay as they were);
  * every input row a layer's windows touch (re-derived here, clipped to the image) sits in the
    previous layer's buffer at slot (row - that buffer's first row for the band), written by
    an earlier band or this one and neither overwritten nor moved away since;
  * a fused ADD (CONV_2D_ADD) reads its skip at its own output rows: each of them sits in the
    skip layer's buffer at the slot the band table's skip byte gives (whole rows, inside the
    buffer), written by the skip layer and neither overwritten nor moved away since;
  * a layer writes its new rows inside its buffer, over none of the bytes it reads (its input
    rows, its skip rows) nor its kernel scratch, and computes each of its output rows at most
    once (no halo is recomputed), the last layer each stage output row exactly once.
"""
from __future__ import annotations

import numpy as np

from ..errors import CompilerBug


def _taps(lo: int, n: int, stride: int, pad: int, k: int, d: int, size: int) -> list[int]:
    """The input rows the windows of output rows lo..lo+n-1 read (with dilation d not a
    contiguous range for one row), clipped to [0, size): padding taps read no memory."""
    return sorted({i for o in range(lo, lo + n) for t in range(k) if 0 <= (i := o * stride - pad + t * d) < size})


def _prove_layout(stage, geo, block: int, where: str) -> list[int]:
    n = len(geo)
    for k in range(n - 1):
        off, size = int(stage.buf_offsets[k]), int(stage.buf_bytes[k])
        row_b = geo[k]["out_w"] * geo[k]["out_c"]
        if off < 0 or off % 16 or off + size > block or size < row_b:
            raise CompilerBug(f"{where}: patch buffer {k} [{off}, {off + size}) is misaligned, outside "
                              f"the {block}-byte scratch block or smaller than one row")
    for k, (so, sn) in enumerate(stage.kernel_scratch or []):
        so, sn = int(so), int(sn)
        if sn and (so < 0 or so % 16 or so + sn > block):
            raise CompilerBug(f"{where}: layer {k}'s kernel scratch [{so}, {so + sn}) is misaligned or "
                              f"outside the scratch block")
    return [int(stage.buf_bytes[k]) // (geo[k]["out_w"] * geo[k]["out_c"]) for k in range(n - 1)]


class _Block:
    """What each row slot of each patch buffer holds (an output row of its layer, or None),
    with writes anywhere in the block wiping every other buffer's slots they overlap."""

    def __init__(self, stage, geo, caps):
        self.off = [int(o) for o in stage.buf_offsets]
        self.row = [gk["out_w"] * gk["out_c"] for gk in geo[:-1]]
        self.slots = [[None] * cap for cap in caps]

    def wipe(self, lo: int, hi: int, keep: int | None = None) -> None:
        for j, sl in enumerate(self.slots):
            if j == keep:
                continue
            for i in range(len(sl)):
                a = self.off[j] + i * self.row[j]
                if a < hi and lo < a + self.row[j]:
                    sl[i] = None

    def bytes_of(self, k: int, first: int, count: int) -> tuple[int, int]:
        return self.off[k] + first * self.row[k], self.off[k] + (first + count) * self.row[k]


def _read(slots, caps, j: int, slot: int, y: int, what: str) -> tuple[int, int]:
    """(j, slot) after checking that slot `slot` of patch buffer j holds output row y of layer j."""
    have = slots[j][slot] if 0 <= slot < caps[j] else "nothing (outside the buffer)"
    if have != y:
        raise CompilerBug(f"{what} of layer {j}'s output at slot {slot} of patch buffer {j}, which "
                          f"holds {have} (a kept row lost, overwritten or moved wrong)")
    return j, slot


def prove_cached(stage, geo: list[dict], block: int, where: str) -> dict:
    n, c = len(geo), stage.cache
    if len(c.first_rows) != len(stage.tiles) or len(c.moves) != len(stage.tiles) \
            or len(c.skip_offsets) != len(stage.tiles) or any(len(s) != n for s in c.skip_offsets):
        raise CompilerBug(f"{where}: cached halos for {len(c.first_rows)} bands (skip offsets for "
                          f"{len(c.skip_offsets)}), the stage has {len(stage.tiles)} of {n} layers")
    caps = _prove_layout(stage, geo, block, where)
    mem = _Block(stage, geo, caps)
    slots = mem.slots
    ks = stage.kernel_scratch or [(0, 0)] * n
    made = [np.zeros(gk["out_h"], np.int32) for gk in geo]
    for b, regions in enumerate(stage.tiles):
        if len(regions) != n or len(c.first_rows[b]) != n - 1 or len(c.moves[b]) != n - 1:
            raise CompilerBug(f"{where}, band {b}: regions, first rows or moves not one per layer")
        for k, gk in enumerate(geo):
            tag = f"{where}, band {b}, layer {k}"
            if k < n - 1:   # the move of the rows the buffer keeps
                row_b = gk["out_w"] * gk["out_c"]
                src, nbytes = (int(v) for v in c.moves[b][k])
                if src % row_b or nbytes % row_b or src < 0 or nbytes < 0 or (src + nbytes) // row_b > caps[k]:
                    raise CompilerBug(f"{tag}: the move of {nbytes} B from byte {src} is not whole rows "
                                      f"of buffer {k} ({caps[k]} rows of {row_b} B)")
                s, m = src // row_b, nbytes // row_b
                slots[k][:m] = slots[k][s:s + m]
                mem.wipe(*mem.bytes_of(k, 0, m), keep=k)
            y0, x0, rows, cols = (int(v) for v in regions[k])
            if rows == 0:
                continue   # the C skips the layer's kernel (kernel index -1)
            if x0 != 0 or cols != gk["out_w"] or y0 < 0 or rows < 0 or y0 + rows > gk["out_h"]:
                raise CompilerBug(f"{tag}: region {tuple(regions[k])} is not whole rows of "
                                  f"{gk['out_h']}x{gk['out_w']}")
            so, sn = (int(v) for v in ks[k])
            if sn:   # the kernel's scratch: whatever it overlaps is gone (its input too)
                mem.wipe(so, so + sn)
            reads = []   # (buffer, slot) of every row the kernel reads
            if k > 0:
                base = int(c.first_rows[b][k - 1])
                for y in _taps(y0, rows, gk["sh"], gk["pad_t"], gk["kh"], gk["dh"], gk["in_h"]):
                    reads.append(_read(slots, caps, k - 1, y - base, y, f"{tag}: reads row {y}"))
            if gk["skip"] is not None:   # the ADD's skip: rows y0.. of layer j at the table's byte
                j, off = gk["skip"] - 1, int(c.skip_offsets[b][k])
                if off % mem.row[j]:   # a negative one: _read finds it outside the buffer
                    raise CompilerBug(f"{tag}: its skip rows start at byte {off} of patch buffer {j}, "
                                      f"not a whole row of {mem.row[j]} B")
                for i in range(rows):
                    reads.append(_read(slots, caps, j, off // mem.row[j] + i, y0 + i,
                                       f"{tag}: its fused ADD reads skip row {y0 + i}"))
            made[k][y0:y0 + rows] += 1
            if k < n - 1:
                first = int(c.first_rows[b][k])
                if y0 - first < 0 or y0 - first + rows > caps[k]:
                    raise CompilerBug(f"{tag}: writes rows {y0}..{y0 + rows - 1} at slots {y0 - first}.. of "
                                      f"patch buffer {k}, which has {caps[k]} rows")
                lo, hi = mem.bytes_of(k, y0 - first, rows)
                if sn and so < hi and lo < so + sn:
                    raise CompilerBug(f"{tag}: its kernel scratch [{so}, {so + sn}) overlaps the rows it "
                                      f"writes [{lo}, {hi})")
                for j, slot in reads:   # the kernel reads these while it writes
                    rlo, rhi = mem.bytes_of(j, slot, 1)
                    if rlo < hi and lo < rhi:
                        raise CompilerBug(f"{tag}: writes [{lo}, {hi}) over row {slots[j][slot]} of "
                                          f"patch buffer {j}, which it reads")
                mem.wipe(lo, hi, keep=k)
                slots[k][y0 - first:y0 - first + rows] = range(y0, y0 + rows)
    for k, m in enumerate(made):
        if m.max(initial=0) > 1:
            raise CompilerBug(f"{where}: layer {k} computes output row {int(np.argmax(m))} "
                              f"{int(m.max())} times (cached halos compute each row once)")
    if made[-1].min() != 1:
        raise CompilerBug(f"{where}: the bands never write stage output row {int(np.argmin(made[-1]))}")
    return {"halo": "cached", "bands": len(stage.tiles)}
