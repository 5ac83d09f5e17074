"""Row-band input (`--input-rows`): the image arrives row by row and never exists whole in RAM.

A camera delivers rows, top to bottom, once each. With a patch stage (patch/stage.py) the first
layer only ever reads the input rows of the current row of tiles: the tiles run row-major over
the grid, every tile of one grid row reads the same input rows (the rows a tile's first layer
touches depend only on its output rows), and those ranges only move down from one grid row to
the next. So the stage input can be a *ring* of R rows, R the largest number of input rows one
grid row reads (receptive field height of the first layer times the rows of a tile, halo
included), instead of the whole image:

  * rows are pushed in order (NAME_input_rows, templates/model_rows.c.j2) and each is copied
    once into the ring, at ring row (y - base), where `base` is the first input row the current
    grid row reads; a row no grid row still needs is not stored;
  * when the last row a grid row reads has arrived, its tiles run; then the ring drops the rows
    above the next grid row's first row (a memmove of the kept halo rows to the ring's start)
    and `base` moves to that row. The halo rows stay: no row is ever requested twice;
  * the push that delivers the image's last row runs the rest of the model.

The ring lives at the start of the stage's scratch block, the patch buffers (and, in row
bands, each layer's kernel scratch) after it, so the
arena proof covers it as the stage's scratch, and patch/rows_proof.py simulates this
protocol row by row to show that every input row a tile reads is in the ring when it runs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import EerieError
from .stage import ALIGN, PatchPlan, _align

MODES = ("whole", "rows")
# Tiles per axis the planner tries with row-band input: a grid row of one output row keeps the
# ring at the receptive field's height, so finer grids than patch/stage.py's MAX_GRID pay off.
MAX_GRID_ROWS = 12


@dataclass(frozen=True)
class RowBands:
    """The ring of input rows of one patch stage."""
    height: int                   # rows of the image
    row_bytes: int                # bytes of one input row (width x channels)
    ring_rows: int                # R: rows the ring holds
    ring_bytes: int               # R x row_bytes, rounded up to ALIGN (patch buffers follow)
    grid_cols: int                # tiles per grid row (they share the ring's rows)
    spans: tuple                  # per grid row: (first, last) input row its tiles read

    @property
    def image_bytes(self) -> int:
        return self.height * self.row_bytes


def row_spans(stage: PatchPlan) -> list[tuple[int, int]]:
    """(first, last) input row each grid row's tiles read, from the planner's geometry."""
    first = stage.layers[0]
    gy, gx = stage.grid
    spans = []
    for r in range(gy):
        lo = hi = None
        for regs in stage.tiles[r * gx:(r + 1) * gx]:
            if regs[0][2] == 0 or first.needs(regs[0])[2] == 0:   # cached halos: the band computes
                # no row of the first layer, or only rows of a PAD's padding (reading none)
                prev = spans[-1][1] if spans else 0
                lo, hi = (prev, prev) if lo is None else (lo, hi)
                continue
            y0, _, rows, _ = first.needs(regs[0])
            lo = y0 if lo is None else min(lo, y0)
            hi = y0 + rows - 1 if hi is None else max(hi, y0 + rows - 1)
        spans.append((lo, hi))
    return spans


def with_rows(stage: PatchPlan) -> PatchPlan:
    """The stage with a ring of input rows at the start of its scratch block. The output can no
    longer share the input's bytes (the input is not in the arena), so no shift."""
    first = stage.layers[0]
    spans = row_spans(stage)
    ring_rows = max(hi - lo + 1 for lo, hi in spans)
    row_bytes = first.in_w * first.in_c
    ring_bytes = _align(ring_rows * row_bytes)
    rows = RowBands(first.in_h, row_bytes, ring_rows, ring_bytes, stage.grid[1], tuple(spans))
    # row bands (patch/band_kernels.py): each layer's kernel scratch moves past the ring too;
    # the ring keeps the next grid row's halo rows between calls, so nothing may write there
    ks = None if stage.kernel_scratch is None else [(o + ring_bytes, b) for o, b in stage.kernel_scratch]
    return dataclasses.replace(stage, buf_offsets=[o + ring_bytes for o in stage.buf_offsets],
                               scratch_bytes=stage.scratch_bytes + ring_bytes, shift=None, rows=rows,
                               kernel_scratch=ks)


def check_graph(g) -> None:
    """Row-band input needs one int8 image input read by the first op only (the stage)."""
    if len(g.inputs) != 1:
        raise EerieError(f"--input-rows: the model has {len(g.inputs)} inputs; row bands need exactly one")
    tid = g.inputs[0]
    readers = g.readers().get(tid, [])
    if len(readers) != 1 or not g.ops or g.ops[0].inputs[:1] != [tid] or tid in g.outputs:
        raise EerieError("--input-rows: the model's input must be read by its first layer only")


def summary(stage: PatchPlan) -> dict:
    """What report.json shows of the ring (report.md: 'input: row bands of ...')."""
    r = stage.rows
    return {"mode": "rows", "ring_rows": r.ring_rows, "ring_bytes": r.ring_bytes,
            "row_bytes": r.row_bytes, "image_rows": r.height, "image_bytes": r.image_bytes,
            "grid_rows": len(r.spans), "spans": [list(s) for s in r.spans]}


def describe(info: dict) -> str:
    return (f"input: row bands of {info['ring_rows']} rows, {info['ring_bytes']:,} B instead of "
            f"{info['image_bytes']:,} B (the image's {info['image_rows']} rows of {info['row_bytes']:,} B, "
            f"pushed in order with NAME_input_rows; each row is copied once)")


__all__ = ["ALIGN", "MAX_GRID_ROWS", "MODES", "RowBands", "check_graph", "describe", "row_spans", "summary", "with_rows"]
