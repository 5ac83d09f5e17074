"""Patch-based execution of the first layers (MCUNetV2's idea): geometry and the planner's choice.

A layer-by-layer schedule never needs less RAM than its largest set of live activations, and on
image models that peak sits in the first, high-resolution layers. A *patch stage* runs a prefix
of the graph (a chain of int8 CONV_2D / DEPTHWISE_CONV_2D, batch 1, and in row bands pools,
PAD and element-wise layers too: patch/ops.py) tile by tile: the output of
the prefix's last layer is cut into a grid of tiles, and for each tile every layer computes only
the region of its output that the tile needs (its receptive field, halo included), into small
per-layer patch buffers. Only the prefix's input and output exist at full size; the intermediates
shrink to one tile's region, at the cost of recomputing the overlapping halos.

Regions are (y0, x0, rows, cols) of a layer's output in that tensor's own coordinates. A layer
reads the input region its window touches, clipped to the image (taps in the padding read no
memory: the kernel adds the zero point's term itself, so the arithmetic is the layer-by-layer one).
Patch buffer k holds layer k's region for the current tile, rows x cols x channels, row-major.
Two buffers are live at once (layer k reads buffer k-1 and writes buffer k), so they go at the
two ends of one scratch block of S = max(size(k-1) + size(k)) bytes: even k at offset 0, odd k
ending at S. patch/proof.py checks all of this independently of this module.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kernels.window import out_size, pad_before   # TFLite's output size and padding, as the kernels use them
from . import ops as layer_ops   # pools, PAD and element-wise layers (row bands only)
from .ops import main_input, skip_input

ALIGN = 16
# CONV_2D_ADD (a convolution with its residual ADD fused, passes/fuse_conv_add.py) only in
# row bands, whose layers run their own kernels (patch/band_kernels.py); its skip input must
# be an earlier layer's output in the stage, read at the layer's own output region
CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D_ADD")
KINDS = CONVS + layer_ops.KINDS
MAX_GRID = 8        # tiles per axis the planner tries
MAX_BANDS = 16      # row bands (grid N x 1) it tries: cheap per band with the layers' kernels
MAX_PREFIX = 12     # layers the planner tries in one stage
CACHED_STEPS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96)   # steps of cached-halo stages tried


@dataclass(frozen=True)
class Layer:
    """The window geometry of one layer of a stage (NHWC, batch 1)."""
    kind: str
    in_h: int
    in_w: int
    in_c: int
    out_h: int
    out_w: int
    out_c: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pad_t: int
    pad_l: int

    @property
    def macs_per_pixel(self) -> int:
        if self.kind not in CONVS:   # pools, PAD, element-wise: no MACs
            return 0
        per_tap = 1 if self.kind == "DEPTHWISE_CONV_2D" else self.in_c
        return self.out_c * self.kh * self.kw * per_tap

    def needs(self, region: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """The input region (clipped to the image) that this layer reads for `region`: no
        rows when `region` has none or lies wholly in a PAD's padding (which reads nothing)."""
        y0, x0, rows, cols = region
        ylo = max(0, y0 * self.sh - self.pad_t)
        yhi = min(self.in_h - 1, (y0 + rows - 1) * self.sh - self.pad_t + (self.kh - 1) * self.dh)
        xlo = max(0, x0 * self.sw - self.pad_l)
        xhi = min(self.in_w - 1, (x0 + cols - 1) * self.sw - self.pad_l + (self.kw - 1) * self.dw)
        nrows, ncols = (max(yhi - ylo + 1, 0) if rows > 0 else 0), (max(xhi - xlo + 1, 0) if cols > 0 else 0)
        return min(ylo, self.in_h - 1), min(xlo, self.in_w - 1), nrows, ncols


@dataclass
class PatchPlan:
    """One patch stage: ops steps [0, len(ops)) of the graph, run tile by tile."""
    ops: list                      # the original Op objects, in order
    layers: list[Layer]
    tensors: list[str]             # stage input, the intermediates, stage output
    grid: tuple[int, int]
    tiles: list[list[tuple[int, int, int, int]]]   # per tile, per layer: its output region
    buf_offsets: list[int]         # per intermediate k (layer k's output) in the scratch block
    buf_bytes: list[int]           # what each buffer may hold (largest region, aligned)
    scratch_bytes: int
    macs: int                      # MACs of the stage run layer by layer
    patched_macs: int              # MACs of the stage run tile by tile
    # Where the stage output may start relative to the stage input's first byte so that the
    # two share bytes (None: they may not): no tile writes an output byte over an input byte
    # a later tile still reads (out_shift below). Used when the input lives in the arena and
    # nothing after the stage reads it (plan/lifetimes.py, "shift" layout).
    shift: int | None = None
    # Row bands (patch/band_kernels.py): per layer, (offset, bytes) in the scratch block of
    # its own kernel's scratch, in the gap between the two patch buffers live at that layer
    # (the one it reads, the one it writes); None for the per-tile C, which needs none.
    kernel_scratch: list[tuple[int, int]] | None = None
    # per layer: the index in `tensors` of the skip input its fused ADD reads (CONV_2D_ADD),
    # or None
    skips: list[int | None] | None = None
    # Row-band input (patch/rows.py RowBands): the stage input is a ring of rows at the
    # start of the scratch block instead of a whole tensor; None: the whole input.
    rows: object = None
    # Cached halos (patch/cache.py CachedBands): row bands whose layers compute each
    # output row once, the rows the next band reads again kept in the buffers; None: recomputed.
    cache: object = None
    # Row bands: the layers (indices) whose kernels run their low-scratch variant (a
    # depthwise without sign-extended rows, kernels/depthwise.py), chosen by
    # patch/choice.py when the layer's scratch sets the stage's and the arena shrinks.
    low_scratch: frozenset = frozenset()

    @property
    def bands(self) -> bool:
        """Row bands (grid N x 1, every region all of its layer's columns): each layer then
        runs its own kernel over the band (patch/band_kernels.py), costed so (estimate.py)."""
        return self.kernel_scratch is not None

    @property
    def extra_macs(self) -> int:
        return self.patched_macs - self.macs

    def max_region(self, k: int) -> tuple[int, int]:
        return (max(t[k][2] for t in self.tiles), max(t[k][3] for t in self.tiles))


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layer_of(op, g) -> Layer | None:
    """The geometry of op, or None if it cannot be in a patch stage (not an int8 conv,
    depthwise, pool, PAD or unary element-wise op over a batch-1 NHWC tensor, or a padding
    this module does not know)."""
    if op.kind not in KINDS or op.attrs.get("alias_of_input") or len(op.outputs) != 1:
        return None
    if op.kind in layer_ops.KINDS:
        args = layer_ops.layer_args(op, g, out_size, pad_before)
        return None if args is None else Layer(*args)
    xi = 1 if op.kind == "CONV_2D_ADD" else 0
    if len(op.inputs) < xi + 2 or any(t is None for t in op.inputs[:xi + 2]):
        return None
    x, w, y = g.t(op.inputs[xi]), g.t(op.inputs[xi + 1]), g.t(op.outputs[0])
    if x.dtype != "int8" or y.dtype != "int8" or w.dtype != "int8" or not w.is_const:
        return None
    if w.int4:   # 4-bit weights: their own kernels (kernels/_int4.py), not the patch stage's
        return None
    if xi and ("conv_output" not in op.attrs or g.t(op.inputs[0]).dtype != "int8"
               or tuple(g.t(op.inputs[0]).shape) != tuple(y.shape)):
        return None
    if len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != 1 or y.shape[0] != 1:
        return None
    a = op.attrs
    padding = a.get("padding", "VALID")
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        return None
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    kh, kw = (w.shape[1], w.shape[2])
    if op.kind == "DEPTHWISE_CONV_2D" and w.shape[3] != x.shape[3]:
        return None   # depth multiplier > 1: not in the per-tile kernel
    _, in_h, in_w, in_c = x.shape
    _, out_h, out_w, out_c = y.shape
    if padding == "EXPLICIT":   # a folded PAD (passes/fold_pad.py): VALID over the padded size
        t, b, left, r = a["explicit_padding"]
        if (out_size("VALID", in_h + t + b, kh, sh, dh), out_size("VALID", in_w + left + r, kw, sw, dw)) \
                != (out_h, out_w):
            return None
        return Layer(op.kind, in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, sh, sw, dh, dw, t, left)
    if (out_size(padding, in_h, kh, sh, dh), out_size(padding, in_w, kw, sw, dw)) != (out_h, out_w):
        return None
    pad_t = pad_before(in_h, out_h, kh, sh, dh)
    pad_l = pad_before(in_w, out_w, kw, sw, dw)
    return Layer(op.kind, in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, sh, sw, dh, dw, pad_t, pad_l)


def chain_prefix(g) -> tuple[list, list[Layer]]:
    """The longest run of patchable ops from step 0 where each slides over the previous one's
    output, which is no graph output, and a fused ADD's skip input is an earlier one's output.
    Which lengths may form a stage: closed() (the stage's intermediates read inside it only)."""
    ops, layers = [], []
    for op in g.ops[:MAX_PREFIX]:
        lay = layer_of(op, g)
        if lay is None:
            break
        if ops:
            prev = ops[-1].outputs[0]
            if main_input(op, g, prev) != prev or prev in g.outputs:
                break
            skip = skip_input(op, prev)
            if skip is not None and not g.t(skip).is_const and skip not in [o.outputs[0] for o in ops]:
                break   # a skip input must be an earlier layer's output (not the stage input)
        elif op.inputs[0] in g.outputs or op.kind == "CONV_2D_ADD" \
                or main_input(op, g, op.inputs[0]) != op.inputs[0] or layer_ops.two_activations(op, g):
            break   # (the stage input is the first op's input 0, and no skip can precede it)
        ops.append(op)
        layers.append(lay)
    return ops, layers


def closed(g, ops) -> bool:
    """Whether every intermediate of a stage of these ops (each output but the last) is read
    by the stage's ops alone and is no graph output: its storage is per tile."""
    readers = g.readers()
    mine = {id(o) for o in ops}
    return all(o.outputs[0] not in g.outputs and all(id(r) in mine for r in readers.get(o.outputs[0], []))
               for o in ops[:-1])


def skips_of(ops) -> list[int | None]:
    """Per op: the index of its skip input among the stage's tensors (input, then each op's
    output), or None."""
    tensors = [ops[0].inputs[0]] + [o.outputs[0] for o in ops]
    skips = [skip_input(o, tensors[k]) for k, o in enumerate(ops)]
    return [tensors.index(s) if s in tensors[1:] else None for s in skips]


def _bounds(n: int, parts: int) -> list[tuple[int, int]]:
    cuts = [n * i // parts for i in range(parts + 1)]
    return [(a, b - a) for a, b in zip(cuts, cuts[1:])]


def _union(a, b):
    y0, x0 = min(a[0], b[0]), min(a[1], b[1])
    return y0, x0, max(a[0] + a[2], b[0] + b[2]) - y0, max(a[1] + a[3], b[1] + b[3]) - x0


def tile_regions(layers: list[Layer], grid: tuple[int, int], skips=None) -> list[list[tuple[int, int, int, int]]]:
    """Per tile (row-major over the grid), per layer: the output region that layer computes:
    what the next layer's windows need, and the output region of a later fused ADD that reads
    it as its skip input."""
    n, last = len(layers), layers[-1]
    skips = skips or [None] * n
    # a stage with a pool, PAD or element-wise layer runs in row bands only, whose kernels read
    # and write whole rows: in N x 1 grids its regions take every column, even one no window
    # reads (a VALID pool's last column); conv-only stages keep their exact regions
    whole = grid[1] == 1 and any(lay.kind not in CONVS for lay in layers)
    tiles = []
    for y0, rows in _bounds(last.out_h, grid[0]):
        for x0, cols in _bounds(last.out_w, grid[1]):
            regs = [None] * n
            regs[-1] = (y0, x0, rows, cols)
            for k in range(n - 1, 0, -1):   # layer k-1's output: read by layer k, and by skips
                reg = layers[k].needs(regs[k])
                for m in range(k, n):
                    if skips[m] == k:
                        reg = _union(reg, regs[m])
                regs[k - 1] = (reg[0], 0, reg[2], layers[k - 1].out_w) if whole else reg
            tiles.append(regs)
    return tiles


def make_plan(ops, layers: list[Layer], grid: tuple[int, int], kernel_scratch=None) -> PatchPlan | None:
    """kernel_scratch: per layer, the scratch bytes of its layer-by-layer kernel, which its
    kernel over a row band needs at most (patch/band_kernels.py checks it). None when the
    stage cannot run so: a fused ADD outside row bands, or three buffers live at once."""
    n = len(layers)
    grid = (max(1, min(grid[0], layers[-1].out_h)), max(1, min(grid[1], layers[-1].out_w)))
    skips = skips_of(ops)
    tiles = tile_regions(layers, grid, skips)
    sizes = [_align(max(t[k][2] * t[k][3] for t in tiles) * layers[k].out_c) for k in range(n - 1)]
    bands = grid[1] == 1 and all(r[1] == 0 and r[3] == lay.out_w for t in tiles for r, lay in zip(t, layers))
    if (any(s is not None for s in skips) or any(lay.kind not in CONVS[:2] for lay in layers)) and not bands:
        return None   # the per-tile C (patch/kernel.py) has convolutions only, no fused ADD
    if any(r[2] < 1 for t in tiles for r in t):
        return None   # a layer with no row to compute (a band in a PAD's padding): cached stages only
    inner = [_align(b) for b in (kernel_scratch or [0] * n)] if bands else [0] * n
    # at layer k buffer j (layer j's output) is live from j to its last reader (layer j+1, or
    # a later ADD reading it as its skip); even buffers start at 0, odd ones end at the
    # block's end, so at most one of each may be live at once; a layer's kernel scratch goes
    # between them
    last = [max([j + 1] + [m for m in range(n) if skips[m] == j + 1]) for j in range(n - 1)]
    live = [[j for j in range(n - 1) if j <= k <= last[j]] for k in range(n)]
    if any(len({j % 2 for j in lv}) != len(lv) for lv in live):
        return None
    total = max(sum(sizes[j] for j in live[k]) + inner[k] for k in range(n))
    offsets = [0 if k % 2 == 0 else total - s for k, s in enumerate(sizes)]
    ks = None
    if bands:
        ks = [(sum(sizes[j] for j in live[k] if j % 2 == 0), inner[k]) for k in range(n)]
    macs = sum(lay.out_h * lay.out_w * lay.macs_per_pixel for lay in layers)
    patched = sum(t[k][2] * t[k][3] * layers[k].macs_per_pixel for t in tiles for k in range(n))
    tensors = [ops[0].inputs[0]] + [op.outputs[0] for op in ops]
    return PatchPlan(list(ops), list(layers), tensors, grid, tiles, offsets, sizes, total, macs, patched,
                     shift=out_shift(layers, tiles), kernel_scratch=ks, skips=skips)


def out_shift(layers: list[Layer], tiles) -> int:
    """The largest 16-byte-aligned d such that the stage output placed d bytes after the stage
    input's first byte is safe: tiles run in order, each reads its input (layer 0) before it
    writes its output (last layer), so every byte tiles 0..t wrote must lie below every input
    byte tiles t+1.. read: d + (end of the writes so far) <= (first byte read from now on)."""
    first, last = layers[0], layers[-1]
    row_in, row_out = first.in_w * first.in_c, last.out_w * last.out_c
    reads, writes = [], []
    big = first.in_h * row_in   # a step of a cached stage (patch/cache.py) may compute no
    for regs in tiles:          # row of the first or the last layer: it reads / writes nothing
        y0, x0, rows, cols = first.needs(regs[0]) if regs[0][2] > 0 else (first.in_h, 0, 0, 0)
        reads.append(min(y0 * row_in + x0 * first.in_c, big))
        oy, ox, orows, ocols = regs[-1]
        writes.append((oy + orows - 1) * row_out + (ox + ocols) * last.out_c if orows > 0 else 0)
    best = None
    end = 0
    for t in range(len(tiles) - 1):
        end = max(end, writes[t])
        d = min(reads[t + 1:]) - end
        best = d if best is None else min(best, d)
    if best is None:   # one tile: it reads everything before it writes anything
        best = 0
    return best // ALIGN * ALIGN   # floor: any smaller d is safe too


def candidates(g, total_macs: int, max_recompute: float, growth=None, kernel_scratch=None,
               adapt=None, max_grid: int = MAX_GRID, cached=None) -> tuple[list[PatchPlan], list[dict]]:
    """For each prefix length (at least two layers), the grid with the smallest patch
    buffers whose cost stays within max_recompute percent (ties: fewer tiles); the planner then
    compares whole arenas (patch/choice.py). The cost is growth(plan), the estimated
    instruction growth of the whole model in percent (pipeline, estimate.py), or where that is
    None (no estimate for the target) the halo recomputation's extra MACs in percent of the
    model's, which also bound it where the estimate is lower (uncalibrated per-tile costs on
    the M3 / RISC-V, estimate.py). kernel_scratch: per layer of the prefix, its kernel's
    scratch bytes (make_plan). adapt(plan): the plan as it will run (a ring of input rows,
    patch/rows.py), whose scratch is what the grids are compared by; max_grid: tiles per
    axis tried (row bands: up to MAX_BANDS, or max_grid if larger). Returns (those plans, per
    prefix length without one: the cheapest grid refused). cached(ops, layers, bands,
    kernel_scratch): the same row bands with cached halos (patch/cache.py) or None, a
    further candidate of each N x 1 grid, compared with the recomputing one by the same key."""
    ops, layers = chain_prefix(g)
    out, refused = [], []
    for n in range(2, len(ops) + 1):
        if not closed(g, ops[:n]):
            continue
        best, cheapest = {False: None, True: None}, None
        last = layers[n - 1]
        for gy in range(1, min(max(MAX_BANDS, max_grid), last.out_h) + 1):
            for gx in range(1, min(max_grid, last.out_w) + 1):
                if gy * gx == 1 or (gy > max_grid and gx > 1):
                    continue
                kss = kernel_scratch[:n] if kernel_scratch else None
                plans = [make_plan(ops[:n], layers[:n], (gy, gx), kss)]
                if gx == 1 and gy == 2 and cached is not None:   # cached halos: steps of the first layer's rows
                    plans += [cached(ops[:n], layers[:n], s, kss) for s in CACHED_STEPS if s <= layers[0].out_h]
                for p in plans:
                    if p is not None and adapt is not None:
                        p = adapt(p)   # the stage as it will run (with row-band input: its ring)
                    if p is None:
                        continue
                    # the best recomputing and the best cached stage of each length both go on
                    # to be planned: which arena is smaller depends on more than their scratch
                    # (only a recomputing stage's output may share its input's bytes)
                    kind = p.cache is not None
                    best[kind], cheapest = _consider(p, total_macs, max_recompute, growth, best[kind],
                                                     cheapest, gy, gx)
        out += [b[1] for b in best.values() if b is not None]
        if all(b is None for b in best.values()) and cheapest is not None:
            cost, p, mac_pct, est = cheapest
            what = (f"estimated instruction growth {est:.1f}%" if est is not None and est >= mac_pct
                    else f"extra MACs {mac_pct:.1f}%")
            refused.append({"layers": n, "grid": list(p.grid), "extra_macs_percent": round(mac_pct, 2),
                            "est_growth_percent": None if est is None else round(est, 2),
                            "reason": f"{what} > bound {max_recompute}% with every grid up to "
                                      f"{max_grid}x{max_grid} or {max(MAX_BANDS, max_grid)} row bands (the cheapest shown)"})
    return out, refused


def _consider(p, total_macs, max_recompute, growth, best, cheapest, gy, gx):
    """candidates(): p against the best plan within the bound (by patch buffers, then fewer
    tiles, then the estimated cost: a cached stage against a recomputing one) and the
    cheapest one over it."""
    mac_pct = 100.0 * p.extra_macs / max(total_macs, 1)
    est = growth(p) if growth is not None else None
    cost = mac_pct if est is None else max(est, mac_pct)   # never laxer than MACs
    if p.cache is not None:   # cached halos recompute nothing but always move rows: a bound of
        cost = max(cost, 1e-6)   # 0 (no growth at all) refuses them too, with or without an estimate
    if cost > max_recompute:
        if cheapest is None or cost < cheapest[0]:
            cheapest = (cost, p, mac_pct, est)
        return best, cheapest
    key = (p.scratch_bytes, gy * gx, gy, cost)
    if best is None or key < best[0]:
        best = (key, p)
    return best, cheapest


def summary(p: PatchPlan) -> dict:
    """What report.json / report.md show of a stage."""
    halo = []
    for k, lay in enumerate(p.layers):
        rows, cols = p.max_region(k)
        halo.append({"layer": p.ops[k].name.split(";")[0], "kind": lay.kind,
                     "output": [lay.out_h, lay.out_w, lay.out_c], "max_region": [rows, cols],
                     "buffer_bytes": p.buf_bytes[k] if k < len(p.buf_bytes) else None,
                     "buffer_offset": p.buf_offsets[k] if k < len(p.buf_offsets) else None})
    return {"layers": len(p.layers), "ops": [op.index for op in p.ops], "grid": list(p.grid),
            "tiles": len(p.tiles), "patch_buffer_bytes": p.scratch_bytes,
            "macs": p.macs, "patched_macs": p.patched_macs, "extra_macs": p.extra_macs,
            "per_layer": halo}
