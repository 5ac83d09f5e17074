"""Independent check of every patch stage (patch/stage.py) in a planned graph.

proof.py proves the arena around a stage: the stage is one op that reads its input tensor,
writes its output tensor and owns one scratch block at its step. This proves what happens
inside that block and loop, re-deriving everything from the original ops (their attributes and
tensor shapes), never from the planner's geometry:

  * the stage's ops form a chain from the stage input to the stage output, and none of the
    intermediates exists outside the stage (no other op reads or writes one, none is a graph
    input or output): their storage is per tile, so their lifetime must end inside the loop;
  * the window geometry the C uses (stride, dilation, padding, sizes) is each op's own;
  * simulating the loop tile by tile, layer by layer, with what each patch buffer holds (which
    tensor, which region, which bytes of the scratch block): every layer's output region lies
    inside its tensor; each buffer lies inside the scratch block; the input rows and columns a
    layer's window touches (clipped to the image: padding taps read no memory) are held by the
    buffer of the previous layer's output, written by this tile and not overwritten since, or
    come from the stage input; a layer never writes bytes that hold its own input;
  * the tiles' final regions cover the stage output exactly once;
  * row bands (each layer's own kernel over the band, patch/band_kernels.py): every region
    spans all its layer's columns, and each layer's kernel scratch lies in the block, aligned,
    clear of the patch buffer it reads and the one it writes for the tile.
"""
from __future__ import annotations

import numpy as np

from ..errors import CompilerBug

STAGE = "PATCH_STAGE"


# the ops a stage may hold; the layers without weights take their windows from their own
# attributes: pools (filter, stride, SAME / VALID), PAD (a 1x1 window whose top / left padding
# is the pad amounts, height and width only), unary element-wise ops (1x1, same shape)
CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D_ADD")
POOLS = ("MAX_POOL_2D", "AVERAGE_POOL_2D")
PADS = ("PAD", "PADV2")
UNARY = ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "LOGISTIC", "TANH",
         "QUANTIZE", "ABS", "ELU", "RSQRT", "TABLE_LOOKUP", "CHANNEL_TABLE")
# with a constant operand the same for every row and column, or with a skip input
BINARY = ("ADD", "SUB", "MUL")


def _main(op, g, prev) -> str:
    """The tensor op's window slides over (prev: the previous layer's output); a binary op's
    other operand must be a constant that does not vary over height or width (a row band
    reads all of it) or another activation (its skip input, checked by _prove_chain)."""
    if op.kind == "CONV_2D_ADD":   # input 0 is its skip input
        return op.inputs[1]
    if op.kind in BINARY:
        consts = [t for t in op.inputs if g.t(t).is_const]
        acts = [t for t in op.inputs if not g.t(t).is_const]
        if len(op.inputs) == 2 and len(acts) == 2 and prev in acts:
            return prev
        cshape = list(g.t(consts[0]).shape) if len(consts) == 1 else [0] * 5
        if len(op.inputs) != 2 or len(acts) != 1 or len(cshape) > 4 \
                or any(d != 1 for d in ([1] * (4 - len(cshape)) + cshape)[:3]):
            raise CompilerBug(f"{op.kind} op {op.index} in a patch stage: not one activation and one "
                              f"constant the same for every pixel")
        return acts[0]
    return op.inputs[0]


def _window(op, g) -> tuple:
    """(kh, kw, sh, sw, dh, dw, SAME?) of a convolution or pool, from its attributes."""
    a = op.attrs
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    if op.kind in POOLS:
        return (int(a.get("filter_height", 1)), int(a.get("filter_width", 1)), sh, sw, 1, 1,
                a.get("padding") == "SAME")
    w = g.t(op.inputs[2 if op.kind == "CONV_2D_ADD" else 1])
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    return int(w.shape[1]), int(w.shape[2]), sh, sw, dh, dw, a.get("padding") == "SAME"


def _geometry(op, g, prev) -> dict:
    """The op's own window geometry (TFLite's padding rule), computed here from scratch."""
    x, y = g.t(_main(op, g, prev)), g.t(op.outputs[0])
    geo = dict(kind=op.kind, in_h=x.shape[1], in_w=x.shape[2], in_c=x.shape[3], out_h=y.shape[1],
               out_w=y.shape[2], out_c=y.shape[3])
    if op.kind in PADS:   # paddings [[n], [h], [w], [c]] x (before, after): only h and w may pad
        p = [int(v) for v in np.asarray(g.t(op.inputs[1]).data).reshape(-1)]
        if len(p) != 8 or p[0] or p[1] or p[6] or p[7] or min(p) < 0 \
                or (y.shape[1], y.shape[2], y.shape[3]) != (x.shape[1] + p[2] + p[3], x.shape[2] + p[4] + p[5], x.shape[3]):
            raise CompilerBug(f"PAD op {op.index} in a patch stage pads {p}, {list(x.shape)} -> {list(y.shape)}")
        return dict(geo, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pad_t=p[2], pad_l=p[4])
    if op.kind in UNARY + BINARY:
        if tuple(x.shape) != tuple(y.shape):
            raise CompilerBug(f"{op.kind} op {op.index} in a patch stage maps {list(x.shape)} to {list(y.shape)}")
        return dict(geo, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pad_t=0, pad_l=0)
    kh, kw, sh, sw, dh, dw, same = _window(op, g)
    pads = []
    for size, out, k, s, d in ((x.shape[1], y.shape[1], kh, sh, dh), (x.shape[2], y.shape[2], kw, sw, dw)):
        need = (out - 1) * s + (k - 1) * d + 1
        pads.append(max(need - size, 0) // 2 if same else 0)
    if op.attrs.get("padding") == "EXPLICIT":   # a folded PAD (passes/fold_pad.py)
        pads = [int(op.attrs["explicit_padding"][0]), int(op.attrs["explicit_padding"][2])]
    if op.kind in POOLS and x.shape[3] != y.shape[3]:
        raise CompilerBug(f"{op.kind} op {op.index} in a patch stage changes the channels")
    return dict(geo, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad_t=pads[0], pad_l=pads[1])


def _touched(lo: int, n: int, stride: int, pad: int, k: int, d: int, size: int) -> tuple[int, int]:
    """[first, last] input index any window of outputs lo..lo+n-1 touches inside [0, size)."""
    idx = [o * stride - pad + t * d for o in range(lo, lo + n) for t in range(k)]
    idx = [i for i in idx if 0 <= i < size]
    return (min(idx), max(idx)) if idx else (0, -1)


def _prove_chain(g, op, stage, where: str) -> list[dict]:
    ops, tensors = stage.ops, stage.tensors
    if len(ops) < 2 or len(tensors) != len(ops) + 1 or len(stage.layers) != len(ops):
        raise CompilerBug(f"{where}: {len(ops)} ops, {len(tensors)} tensors, {len(stage.layers)} layers")
    if list(op.inputs) != [tensors[0]] or list(op.outputs) != [tensors[-1]]:
        raise CompilerBug(f"{where}: the stage op reads {op.inputs} and writes {op.outputs}, its "
                          f"layers go from {tensors[0]} to {tensors[-1]}")
    geo = []
    for k, sop in enumerate(ops):
        if sop.kind not in CONVS + POOLS + PADS + UNARY + BINARY:
            raise CompilerBug(f"{where}: layer {k} is a {sop.kind} (op {sop.index}), which no stage runs")
        main = _main(sop, g, tensors[k])
        if list(sop.outputs) != [tensors[k + 1]] or main != tensors[k]:
            raise CompilerBug(f"{where}: layer {k} ({sop.kind} op {sop.index}) does not read "
                              f"{tensors[k]} and write {tensors[k + 1]}")
        skip = other = None
        if sop.kind == "CONV_2D_ADD":
            other = sop.inputs[0]
        elif sop.kind in BINARY and not any(g.t(t).is_const for t in sop.inputs):
            other = next(t for t in sop.inputs if t != main) if sop.inputs[0] != sop.inputs[1] else main
        if other is not None:   # its skip: an earlier layer's output, in a patch buffer
            if other not in tensors[1:k + 1] or (sop.kind in BINARY and other == main):
                raise CompilerBug(f"{where}: layer {k}'s skip input {other} is no earlier "
                                  f"layer's output in the stage")
            skip = tensors.index(other)
            if g.t(other).shape != g.t(tensors[k + 1]).shape:
                raise CompilerBug(f"{where}: layer {k}'s skip input is not of its output's shape")
        if any(g.t(t).dtype != "int8" or g.t(t).shape[0] != 1 for t in (tensors[k], tensors[k + 1])):
            raise CompilerBug(f"{where}: layer {k} is not int8 over one batch")
        gk = _geometry(sop, g, tensors[k])
        if sop.kind == "DEPTHWISE_CONV_2D" and gk["in_c"] != gk["out_c"]:
            raise CompilerBug(f"{where}: layer {k} is a depthwise with a depth multiplier")
        mine = {f: getattr(stage.layers[k], f) for f in gk}
        if mine != gk:
            raise CompilerBug(f"{where}: layer {k} is emitted with geometry {mine}, the op has {gk}")
        if (stage.skips or [None] * len(ops))[k] != skip:
            raise CompilerBug(f"{where}: layer {k} is emitted with skip input "
                              f"{(stage.skips or [None] * len(ops))[k]}, the op reads {skip}")
        gk["skip"] = skip
        geo.append(gk)
    inner = set(tensors[1:-1])
    for other in g.ops:
        used = {t for t in list(other.inputs) + list(other.outputs) if t is not None}
        if used & inner:
            raise CompilerBug(f"{where}: {sorted(used & inner)[0]} lives in a per-tile patch buffer "
                              f"but op {other.index} ({other.kind}) uses it outside the stage")
        if any(other is s for s in ops):
            raise CompilerBug(f"{where}: op {other.index} runs both in the stage and on its own")
    if inner & (set(g.inputs) | set(g.outputs)):
        raise CompilerBug(f"{where}: a graph input or output lives in a per-tile patch buffer")
    return geo


def _prove_tiles(stage, geo: list[dict], block: int, where: str) -> None:
    n = len(geo)
    last = geo[-1]
    cover = np.zeros((last["out_h"], last["out_w"]), np.int32)
    ks = getattr(stage, "kernel_scratch", None)
    if ks is None and any(gk["kind"] not in CONVS[:2] for gk in geo):
        raise CompilerBug(f"{where}: a stage with a {next(gk['kind'] for gk in geo if gk['kind'] not in CONVS[:2])} "
                          f"runs only in row bands (the per-tile C has convolutions only)")
    if ks is not None:
        if len(ks) != n:
            raise CompilerBug(f"{where}: kernel scratch for {len(ks)} layers, the stage has {n}")
        for t, regions in enumerate(stage.tiles):   # a band kernel reads whole rows
            for k, gk in enumerate(geo):
                if int(regions[k][1]) != 0 or int(regions[k][3]) != gk["out_w"]:
                    raise CompilerBug(f"{where}, tile {t}, layer {k}: a row band's region "
                                      f"{tuple(regions[k])} is not all {gk['out_w']} columns")
    for t, regions in enumerate(stage.tiles):
        if len(regions) != n:
            raise CompilerBug(f"{where}: tile {t} has {len(regions)} regions for {n} layers")
        held: dict[int, tuple] = {}   # buffer -> (region, first byte, end byte)
        for k, gk in enumerate(geo):
            y0, x0, rows, cols = (int(v) for v in regions[k])
            tag = f"{where}, tile {t}, layer {k}"
            if rows < 1 or cols < 1 or y0 < 0 or x0 < 0 or y0 + rows > gk["out_h"] or x0 + cols > gk["out_w"]:
                raise CompilerBug(f"{tag}: output region {regions[k]} outside {gk['out_h']}x{gk['out_w']}")
            ylo, yhi = _touched(y0, rows, gk["sh"], gk["pad_t"], gk["kh"], gk["dh"], gk["in_h"])
            xlo, xhi = _touched(x0, cols, gk["sw"], gk["pad_l"], gk["kw"], gk["dw"], gk["in_w"])
            src = skip = None
            if gk["skip"] is not None:   # the fused ADD reads its skip at its own output region
                j = gk["skip"] - 1
                if j not in held:
                    raise CompilerBug(f"{tag}: reads its skip input from patch buffer {j}, which no "
                                      f"longer holds what layer {j} wrote for this tile (overwritten)")
                (sy, sx, sr, sc), _, _ = skip = held[j]
                if not (sy <= y0 and y0 + rows <= sy + sr and sx <= x0 and x0 + cols <= sx + sc):
                    raise CompilerBug(f"{tag}: reads its skip input at rows {y0}..{y0 + rows - 1}, "
                                      f"columns {x0}..{x0 + cols - 1}, but layer {j} wrote only rows "
                                      f"{sy}..{sy + sr - 1}, columns {sx}..{sx + sc - 1} for this tile")
            if k > 0:
                if k - 1 not in held:
                    raise CompilerBug(f"{tag}: reads patch buffer {k - 1}, which no longer holds "
                                      f"what layer {k - 1} wrote for this tile (overwritten)")
                (sy, sx, sr, sc), lo, hi = src = held[k - 1]
                if ylo <= yhi and xlo <= xhi and not (sy <= ylo and yhi < sy + sr and sx <= xlo and xhi < sx + sc):
                    raise CompilerBug(f"{tag}: reads input rows {ylo}..{yhi}, columns {xlo}..{xhi}, "
                                      f"but layer {k - 1} wrote only rows {sy}..{sy + sr - 1}, "
                                      f"columns {sx}..{sx + sc - 1} for this tile (halo too small)")
            off = int(stage.buf_offsets[k]) if k < n - 1 else 0
            end = off + rows * cols * gk["out_c"] if k < n - 1 else 0
            if ks is not None:   # row bands: the layer's own kernel's scratch
                so, sn = (int(v) for v in ks[k])
                if so < 0 or so % 16 or so + sn > block:
                    raise CompilerBug(f"{tag}: kernel scratch [{so}, {so + sn}) is misaligned or "
                                      f"outside the {block}-byte scratch block")
                for what, lo, hi in ([("its input, patch buffer %d" % (k - 1), src[1], src[2])] if src else []) + \
                        ([("its skip input, patch buffer %d" % (gk["skip"] - 1), skip[1], skip[2])] if skip else []) + \
                        ([("its output, patch buffer %d" % k, off, end)] if k < n - 1 else []):
                    if so < hi and lo < so + sn:
                        raise CompilerBug(f"{tag}: kernel scratch [{so}, {so + sn}) overlaps "
                                          f"{what} [{lo}, {hi})")
            if k == n - 1:
                cover[y0:y0 + rows, x0:x0 + cols] += 1
                continue
            if off < 0 or off % 16 or end > block:
                raise CompilerBug(f"{tag}: patch buffer {k} at [{off}, {end}) is misaligned or "
                                  f"outside the {block}-byte scratch block")
            for s_ in (src, skip):
                if s_ is not None and off < s_[2] and s_[1] < end:
                    raise CompilerBug(f"{tag}: writes patch buffer {k} [{off}, {end}) over its own "
                                      f"input, a patch buffer at [{s_[1]}, {s_[2]})")
            for j in [j for j, (_, lo, hi) in held.items() if off < hi and lo < end]:
                del held[j]   # overwritten: whatever it held is gone
            held[k] = ((y0, x0, rows, cols), off, end)
    if cover.min() != 1 or cover.max() != 1:
        bad = np.argwhere(cover != 1)[0]
        raise CompilerBug(f"{where}: the tiles write output pixel {tuple(int(v) for v in bad)} "
                          f"{int(cover[tuple(bad)])} times (each must be written once)")


def prove_patches(g, plan, scratch_steps: dict[str, int]) -> dict | None:
    """Prove every patch stage of the planned graph g; None when there is none."""
    stages = 0
    rows_checks = []
    for step, op in enumerate(g.ops):
        if op.kind != STAGE:
            continue
        stage = op.attrs["patch"]
        where = f"patch proof (stage at step {step})"
        blocks = [name for name, s in scratch_steps.items() if s == step]
        if len(blocks) != 1 or blocks[0] not in plan.scratch:
            raise CompilerBug(f"{where}: the stage owns {len(blocks)} scratch blocks, not one")
        block = plan.scratch[blocks[0]].size
        geo = _prove_chain(g, op, stage, where)
        if getattr(stage, "cache", None) is not None:   # row bands with cached halos
            from .cache_proof import prove_cached
            prove_cached(stage, geo, block, where)
        else:
            _prove_tiles(stage, geo, block, where)
        if getattr(stage, "rows", None) is not None:   # --input rows: the ring of input rows
            from .rows_proof import prove_rows
            g0 = geo[0]

            def touched(regions, g0=g0):
                y0, _, rows, _ = (int(v) for v in regions[0])
                return _touched(y0, rows, g0["sh"], g0["pad_t"], g0["kh"], g0["dh"], g0["in_h"])
            rows_checks.append(prove_rows(stage, g0, touched, block, where))
        stages += 1
    if not stages:
        return None
    out = {"check": "patch_plan", "ok": True, "stages": stages}
    if rows_checks:
        out["input_rows"] = rows_checks
    return out


def prove_shift(g, op, in_offset: int, out_offset: int) -> None:
    """A patch stage whose output shares bytes with its input (the planner's "shift" layout):
    simulate the tiles in order over the input's bytes, marking every output byte written;
    each tile's first layer must read only input bytes no earlier tile overwrote (a tile reads
    all its input before it writes its output). Geometry re-derived from the first and last ops."""
    stage = op.attrs["patch"]
    first, last = _geometry(stage.ops[0], g, stage.tensors[0]), _geometry(stage.ops[-1], g, stage.tensors[-2])
    n_in = first["in_h"] * first["in_w"] * first["in_c"]
    row_in, row_out = first["in_w"] * first["in_c"], last["out_w"] * last["out_c"]
    clobbered = np.zeros(n_in, bool)
    delta = out_offset - in_offset
    for t, regions in enumerate(stage.tiles):
        y0, x0, rows, cols = (int(v) for v in regions[0])
        ylo, yhi = _touched(y0, rows, first["sh"], first["pad_t"], first["kh"], first["dh"], first["in_h"])
        xlo, xhi = _touched(x0, cols, first["sw"], first["pad_l"], first["kw"], first["dw"], first["in_w"])
        for iy in range(ylo, yhi + 1):
            a, b = iy * row_in + xlo * first["in_c"], iy * row_in + (xhi + 1) * first["in_c"]
            if clobbered[a:b].any():
                raise CompilerBug(f"patch proof (output over input at {delta:+d} B): tile {t} reads "
                                  f"input row {iy}, which an earlier tile's output overwrote")
        oy, ox, orows, ocols = (int(v) for v in regions[-1])
        for y in range(oy, oy + orows):
            a = delta + y * row_out + ox * last["out_c"]
            b = a + ocols * last["out_c"]
            clobbered[max(a, 0):max(min(b, n_in), 0)] = True
