"""Independent check of a patch stage's ring of input rows (patch/rows.py, --input-rows).

The generated NAME_input_rows (templates/model_rows.c.j2) keeps the ring as described there.
This simulates that very protocol row by row, with what each ring row holds (which image row),
and checks, with the rows each tile's first layer touches re-derived from the op's own geometry
(patch/proof.py passes them in, not the planner's regions):

  * the ring and the patch buffers (and the layers' kernel scratch in row bands) do not
    overlap, and the ring fits in the scratch block;
  * rows are stored at ring row (y - base) < R only, base never moves up past a row still to be
    read, and the grid rows' spans are in the order the tiles run (row-major, grid_cols tiles
    per grid row);
  * when a tile runs, every input row its first layer touches has been pushed, sits at ring row
    (row - base) and was not overwritten or moved away since (the memmove of the kept halo rows
    is simulated byte-row for byte-row);
  * every grid row has run by the time the image's last row is pushed, so each row is pushed
    once and nothing is requested twice.
"""
from __future__ import annotations

from ..errors import CompilerBug


def prove_rows(stage, first_geo: dict, touched, block: int, where: str) -> dict:
    """touched(tile regions) -> (first, last) input row the tile's first layer reads."""
    r = stage.rows
    gy, gx = len(r.spans), r.grid_cols
    h = first_geo["in_h"]
    row_bytes = first_geo["in_w"] * first_geo["in_c"]
    if r.height != h or r.row_bytes != row_bytes:
        raise CompilerBug(f"{where}: the ring is laid out for {r.height} rows of {r.row_bytes} B, the "
                          f"stage input has {h} rows of {row_bytes} B")
    if gy * gx != len(stage.tiles):
        raise CompilerBug(f"{where}: {gy} grid rows of {gx} tiles, but {len(stage.tiles)} tiles")
    ring_end = r.ring_rows * row_bytes
    if r.ring_rows < 1 or ring_end > r.ring_bytes or r.ring_bytes > block:
        raise CompilerBug(f"{where}: a ring of {r.ring_rows} rows ({ring_end} B) in {r.ring_bytes} B "
                          f"of a {block}-byte scratch block")
    for k, off in enumerate(stage.buf_offsets):
        if off < r.ring_bytes:
            raise CompilerBug(f"{where}: patch buffer {k} at {off} overlaps the ring [0, {r.ring_bytes})")
    for k, (off, size) in enumerate(getattr(stage, "kernel_scratch", None) or []):
        if size > 0 and off < r.ring_bytes:   # row bands: the layer's own kernel's scratch
            raise CompilerBug(f"{where}: layer {k}'s kernel scratch at {off} overlaps the ring [0, {r.ring_bytes})")
    ring = [None] * r.ring_rows   # image row held by each ring row
    base, tile_row = r.spans[0][0], 0
    for y in range(h):
        if tile_row < gy and y >= base:   # the C stores the row
            if y - base >= r.ring_rows:
                raise CompilerBug(f"{where}: row {y} would go to ring row {y - base}, past its {r.ring_rows} rows")
            ring[y - base] = y
        pushed = y + 1
        while tile_row < gy and r.spans[tile_row][1] < pushed:
            for t in range(tile_row * gx, (tile_row + 1) * gx):
                lo, hi = touched(stage.tiles[t])
                for iy in range(lo, hi + 1):
                    slot = iy - base
                    if not 0 <= slot < r.ring_rows or ring[slot] != iy:
                        raise CompilerBug(f"{where}: tile {t} reads input row {iy}, which the ring does "
                                          f"not hold then (ring row {slot} holds {ring[slot] if 0 <= slot < r.ring_rows else 'nothing'})")
            tile_row += 1
            if tile_row < gy:
                first = r.spans[tile_row][0]
                if first < base:
                    raise CompilerBug(f"{where}: grid row {tile_row} starts at input row {first}, above "
                                      f"rows the ring already dropped (base {base})")
                if first > base:   # memmove(ring, ring + (first - base) rows, (pushed - first) rows)
                    keep = max(pushed - first, 0)
                    ring[:keep] = ring[first - base:first - base + keep]
                    base = first
    if tile_row != gy:
        raise CompilerBug(f"{where}: after the image's last row only {tile_row} of {gy} grid rows ran")
    return {"check": "patch_input_rows", "ok": True, "ring_rows": r.ring_rows, "grid_rows": gy}
