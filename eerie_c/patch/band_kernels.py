"""A patch stage of row bands (patch/stage.py, grid N x 1) run by the layers' own kernels.

A row band of a layer is a smaller image: the input rows the band's windows touch (all the
columns), the output rows of the band. So each layer of each band is lowered by the layer's
registered kernel (Helium on the M55, the DSP kernels on the M4/M7, ...) over that smaller
image, with the image's top padding only where the band starts at the image's top
(`tile_window` in conv.py's window): the same arithmetic per output element as the whole
layer, so the same bytes as TFLM. The layer kernels cost several times less per MAC than
patch/kernel.py's per-tile C, which is what lets a stage pay on Helium cores.

Bands of one layer differ only in their row counts and top padding: each distinct
(input rows, top padding, output rows) is lowered once, and a const table gives per band and
layer which one runs and where its input and output start (bytes from the stage input, from
the patch buffer or into the stage output). Patch buffers and each layer's kernel scratch
(between the two buffers live at that layer) are placed by patch/stage.py and proven by
patch/proof.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import CompilerBug
from ..ir import Op
from ..kernels import REGISTRY, Lowered

class _BandGraph:
    """The graph as one band's kernel sees it: the layer's input and output tensors cut to
    the band's rows; everything else (weights, quantization) the graph's own."""

    def __init__(self, g, shapes: dict[str, tuple], aliases: dict[str, str] | None = None):
        self._g = g
        self._t = {tid: dataclasses.replace(g.t((aliases or {}).get(tid, tid)), id=tid, shape=shape)
                   for tid, shape in shapes.items()}

    def t(self, tid):
        return self._t.get(tid) or self._g.t(tid)

    def __getattr__(self, name):
        return getattr(self._g, name)


def applies(stage) -> bool:
    """Row bands only (patch/stage.py PatchPlan.bands): a band's rows are contiguous bytes."""
    return stage.bands


def _band(lay, region) -> tuple[int, int, int]:
    """(first input row, input rows, top padding) of the band `region` of layer lay."""
    y0, _, rows, _ = region
    ylo, _, nin, _ = lay.needs(region)
    if nin == 0:   # a band of a PAD's output wholly in its padding: it reads no row at all
        return 0, 0, 0
    return ylo, nin, ylo - (y0 * lay.sh - lay.pad_t)


def _operands(sop, x, skip) -> list[str]:
    """The activations the layer's kernel reads, in its order (in0, in1): x the main input
    (the previous layer's output), skip its skip input or None. A fused ADD reads its skip
    first; a binary op its operands as the op lists them (a constant operand is no input)."""
    if skip is None:
        return [x]
    return [skip, x] if sop.kind == "CONV_2D_ADD" else list(sop.inputs)


def _lower_band(sop, lay, g, ctx, nin: int, pad_t: int, rows: int, low: bool = False,
                x=None, skip=None) -> Lowered:
    """The layer's own kernel over a band: nin input rows, top padding pad_t, rows output rows;
    low: its low-scratch variant (PatchPlan.low_scratch, a kernel that honours "low_scratch");
    x, skip: the stage's tensors the layer reads (PatchPlan.tensors, skips)."""
    y = sop.outputs[0]
    attrs = {**sop.attrs, "tile_window": {"pad_t": pad_t, "pad_l": lay.pad_l}}
    if low:
        attrs["low_scratch"] = True
    inputs = list(sop.inputs)
    out = (1, rows, lay.out_w, lay.out_c)
    shapes = {x: (1, nin, lay.in_w, lay.in_c), y: out}
    want, aliases = _operands(sop, x, skip), {}
    if sop.kind == "CONV_2D_ADD" and skip == x:   # y = x + conv(x): the skip is x's rows at
        aliases[x + "#skip"] = x   # the band's output rows, another shape than its window's
        skip = want[0] = inputs[0] = x + "#skip"   # rows: a name of its own (input 0)
    if skip is not None:   # the skip input's rows are the output's
        shapes[skip] = out
    if sop.kind == "CONV_2D_ADD":   # and the convolution's own output's
        shapes[sop.attrs["conv_output"]] = out
    band = Op(sop.kind, inputs, list(sop.outputs), attrs,
              name=sop.name, index=sop.index, subgraph=sop.subgraph)
    low = REGISTRY[sop.kind].lower(band, _BandGraph(g, shapes, aliases), ctx)
    if low.inputs != want or low.outputs != [y] or low.control or low.updates:
        raise CompilerBug(f"patch stage: {sop.kind} op {sop.index}'s kernel over a band reads "
                          f"{low.inputs}, writes {low.outputs}")
    return low


def _reads(stage, k) -> tuple:
    """(main input, skip input or None) of layer k: tensors of the stage."""
    skips = stage.skips or [None] * len(stage.ops)
    return stage.tensors[k], (stage.tensors[skips[k]] if skips[k] is not None else None)


def band_scratch(stage, g, target: str, optimize: str, memo: dict | None = None) -> list[int]:
    """Per layer, the scratch its kernels over the stage's row bands need (lowered into a
    throw-away context): the planner's first guess, the whole layer's kernel's, may be short
    when a band takes another kernel path than the whole layer. memo: kept across the calls of
    one compile (the planner asks about many stages sharing layers and band shapes)."""
    from ..kernels import LowerCtx
    ctx = None
    memo = {} if memo is None else memo
    out = []
    for k, (sop, lay) in enumerate(zip(stage.ops, stage.layers)):
        need = 0
        for regions in stage.tiles:
            if regions[k][2] == 0:   # cached halos: no new row of this layer in this band
                continue
            _, nin, pad_t = _band(lay, regions[k])
            key = (id(sop), nin, pad_t, regions[k][2], k in stage.low_scratch, _reads(stage, k))
            if key not in memo:
                ctx = ctx or LowerCtx(g, target, optimize)
                memo[key] = _lower_band(sop, lay, g, ctx, nin, pad_t, regions[k][2],
                                        k in stage.low_scratch, *_reads(stage, k)).scratch_bytes
            need = max(need, memo[key])
        out.append(need)
    return out


def lower_bands(op, g, ctx, stage) -> Lowered:
    n = len(stage.layers)
    kernels: list[list[Lowered]] = [[] for _ in range(n)]   # per layer: its distinct bands
    keys: list[dict] = [{} for _ in range(n)]
    skips = stage.skips or [None] * n
    cache = getattr(stage, "cache", None)
    rows = getattr(stage, "rows", None)
    width = 6 if cache is not None else 4
    # per band, per layer: kernel index, input offset, output offset, skip offset (and with
    # cached halos: the kept rows' move into the layer's buffer, source byte and bytes)
    table = []
    for b, regions in enumerate(stage.tiles):
        for k, (sop, lay) in enumerate(zip(stage.ops, stage.layers)):
            region = regions[k]
            move = list(cache.moves[b][k]) if cache is not None and k < n - 1 else [0, 0]
            if region[2] == 0:   # cached halos: no new row of this layer in this band
                base = rows.spans[b][0] * lay.in_w * lay.in_c if k == 0 and rows is not None else 0
                table += [-1, base, 0, 0] + (move if cache is not None else [])
                continue
            ylo, nin, pad_t = _band(lay, region)
            key = (nin, pad_t, region[2])
            if key not in keys[k]:
                keys[k][key] = len(kernels[k])
                kernels[k].append(_lower_band(sop, lay, g, ctx, nin, pad_t, region[2], k in stage.low_scratch,
                                              *_reads(stage, k)))
            src_row0 = 0 if k == 0 else regions[k - 1][0]
            dst_row0 = region[0]   # where the buffer's first byte is in the layer's output
            if cache is not None:   # the buffers start at their kept rows
                src_row0 = 0 if k == 0 else cache.first_rows[b][k - 1]
                dst_row0 = cache.first_rows[b][k] if k < n - 1 else 0
            skip = 0
            if skips[k] is not None and cache is not None:   # where the plan kept them
                skip = cache.skip_offsets[b][k]
            elif skips[k] is not None:   # the skip's rows of this band in its patch buffer
                skip = (region[0] - regions[skips[k] - 1][0]) * lay.out_w * lay.out_c
            out_off = region[0] * lay.out_w * lay.out_c if k == n - 1 else \
                (region[0] - dst_row0) * lay.out_w * lay.out_c if cache is not None else 0
            src_off = (ylo - src_row0) * lay.in_w * lay.in_c
            if nin == 0:   # reads nothing (a PAD's band in its padding): the buffer's or ring's start
                src_off = rows.spans[b][0] * lay.in_w * lay.in_c if k == 0 and rows is not None else 0
            table += [keys[k][key], src_off, out_off, skip]
            table += move if cache is not None else []
    for k, ks in enumerate(kernels):
        need = max((low.scratch_bytes for low in ks), default=0)
        if need > stage.kernel_scratch[k][1]:
            raise CompilerBug(f"patch stage: layer {k}'s kernel needs {need} scratch bytes over a "
                              f"row band, the plan gave it {stage.kernel_scratch[k][1]} (its "
                              f"layer-by-layer kernel's)")
    cname = ctx.const(np.asarray(table, np.int32), "int32_t", "bands",
                      "per band, per layer: which of the layer's band kernels runs, its input's "
                      "first byte (in the stage input or the previous patch buffer), its output's "
                      "first byte in the stage output (last layer)"
                      + (" or its patch buffer, the skip's first byte, and the move of the rows the "
                         "buffer keeps from the previous band: source byte, bytes; kernel -1: "
                         "no new row of the layer in this band" if cache is not None else ""))
    lines = ["/* the stage's pointers, before each layer's block names its own in0 / out0 / scratch */",
             "const int8_t *const stage_in = in0;", "int8_t *const stage_out = out0;",
             "uint8_t *const stage_scratch = scratch;"]
    if rows is None:
        lines += ["int t;", f"for (t = 0; t < {len(stage.tiles)}; ++t) {{",
                  f"    const int32_t *const r = {cname} + t * {width * n};"]
    else:   # --input-rows: one call per band, in0 the ring of input rows from image row base_row
        lines += ["/* row-band input: one call runs band tile_row; in0 is the ring, whose first row is",
                  " * image row base_row (patch/rows_proof.py: the ring holds the band's rows) */",
                  "{", f"    const int32_t *const r = {cname} + tile_row * {width * n};"]
    first = stage.layers[0]
    for k, lay in enumerate(stage.layers):
        src = "stage_in" if k == 0 else f"(const int8_t *)(stage_scratch + {stage.buf_offsets[k - 1]})"
        dst = "stage_out" if k == n - 1 else f"(int8_t *)(stage_scratch + {stage.buf_offsets[k]})"
        name = stage.ops[k].name.split(";")[0] or stage.ops[k].kind
        xin = "in0"
        lines.append(f"    {{   /* layer {k}: {name}, {lay.kind} over the band's rows */")
        if cache is not None and k < n - 1:   # the rows kept from the previous band to the top
            lines += [f"        if (r[{width * k + 5}] != 0) {{   /* the kept halo rows (patch/cache.py) */",
                      f"            memmove({dst}, {dst} + r[{width * k + 4}], (size_t)r[{width * k + 5}]);",
                      "        }"]
        if skips[k] is not None:   # a fused ADD or a binary op: the skip input's pointer
            x, skip = _reads(stage, k)
            order = _operands(stage.ops[k], x, skip)
            si = order.index(skip)   # y = x + conv(x): x is both, the skip first
            lines.append(f"        const int8_t *const in{si} = (const int8_t *)(stage_scratch + "
                         f"{stage.buf_offsets[skips[k] - 1]}) + r[{width * k + 3}];   /* the skip's rows */")
            xin = f"in{next(i for i, t in enumerate(order) if t == x and i != si)}"
        off = f"r[{width * k + 1}]"
        if k == 0 and rows is not None:   # offset first: no pointer before the ring's start
            src, off = "stage_in", f"(r[1] - base_row * {first.in_w * first.in_c})"
        lines += [f"        const int8_t *const {xin} = {src} + {off};",
                  f"        int8_t *const out0 = {dst} + r[{width * k + 2}];",
                  f"        uint8_t *const scratch = stage_scratch + {stage.kernel_scratch[k][0]};"
                  f"   /* between the live patch buffers */",
                  "        (void)scratch;", f"        switch (r[{width * k}]) {{"]
        for i, low in enumerate(kernels[k]):
            body = "\n".join(("                " + ln) if ln.strip() else "" for ln in low.body.splitlines())
            lines += [f"        case {i}: {{", body, "            break;", "        }"]
        lines += ["        default:", "            break;", "        }", "    }"]
    lines.append("}")
    helpers = set().union(*(low.helpers for ks in kernels for low in ks))
    names = ", ".join(f"op {o.index}" for o in stage.ops)
    return Lowered(body="\n".join(lines), inputs=[stage.tensors[0]], outputs=[stage.tensors[-1]],
                   helpers=helpers, scratch_bytes=stage.scratch_bytes, macs=stage.patched_macs,
                   inplace="shift" if stage.shift is not None else False,
                   noinline=any(low.noinline for ks in kernels for low in ks),
                   int_params=["tile_row", "base_row"] if rows is not None else [],
                   comment=f"patch stage: {n} layers ({names}) in {len(stage.tiles)} row bands, "
                           f"each layer's own kernel per band, "
                           + (f"halos cached ({cache.moved_bytes()} B of kept rows moved)" if cache is not None
                              else f"{stage.extra_macs} MACs of halo recomputation"))

