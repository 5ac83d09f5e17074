"""--optimize size: compact weight and requantization formats of the shared DSP convolution
(eerie_conv_pair_s8, helpers/gemm_dsp.c.j2), lossless, chosen per layer by flash bytes.

The default ("balanced") format of a CONV_2D on the shared kernel stores per output channel
its int8 weight row (kp bytes) and 16 bytes of requantization (folded bias, multiplier, radd,
rshift as int32 each). Size mode may replace it with:

* "rq":     the same int8 weight rows, and per channel only 9 bytes: folded bias and
            multiplier (int32) and one byte meta = (bits - 1) | rshift << 3 (rshift >= 1, so
            meta >= 8). radd follows from rshift and the output zero point (folded in, as the
            shared kernel requires), except for channels with multiplier 0 (dead or constant
            outputs, see _dsp.py), whose output is (radd >> 1) whatever the accumulator: they
            store (radd - 1) / 2 in the bias slot and meta 0 (the unpacker uses rshift 1).
            helpers/conv_pack.c.j2 (eerie_conv_unpack_rq) expands the 16-byte rows into scratch
            once per call; the weights are read from flash as before, the loops are unchanged.
* "packed": also the weights of each channel in the fewest bits that hold its values (two's
            complement, `bits` 1..8 in meta; multiplier-0 channels none at all: their weights
            cannot change their output, and vww's later layers are mostly such dead channels,
            zeroed at compile time by _dsp.zero_channels), as an LSB-first bit
            stream, each row starting on a byte. The rows are unpacked in blocks of channels
            into scratch (eerie_conv_unpack_w, the layout eerie_conv_pair_s8 reads), then every
            pixel pair runs the shared kernel over the block (kernels/conv2d_s8_packed.c.j2), so
            the im2col columns are built once per block. A layer that fits one block keeps the
            default loop order (and may run in place).

The choice: the smallest of the three by estimated flash (constants plus the layer's extra
code, CODE_RQ / CODE_PACKED bytes, measured with arm-none-eabi-gcc -O2 for the M4), taken only
if it saves at least MIN_SAVED bytes. Each shared helper function is paid once per model: the
layers add what they save to ctx.size_saved per helper they need (packed layers credit
eerie_conv_unpack_w with what they save beyond "rq"), and when a helper's total is below its
code (HELPER_CODE), kernels.lower_graph lowers the model again with it off (ctx.size_off).
BLOCK_BYTES bounds the unpacked block (scratch, planned in the arena like any kernel scratch).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ._dsp import pad_to

BLOCK_BYTES = 4096     # unpacked weights + requantization rows of one block of channels
CODE_RQ = 24           # the unpack call before the layer's loops
CODE_PACKED = 120      # the block loop and the unpack calls
MIN_SAVED = 64
HELPER_CODE = {"eerie_conv_unpack_rq": 160, "eerie_conv_unpack_w": 256, "eerie_dw_unpack_rq": 136,
               "eerie_dw_unpack_w": 96}


def unpaid_helpers(saved: dict[str, int]) -> frozenset[str]:
    """The helpers whose layers together save less than the helper's own code (none while
    FORCE makes the formats for a test)."""
    if FORCE is not None:
        return frozenset()
    return frozenset(h for h, n in saved.items() if n < HELPER_CODE[h])


def _credit(ctx, helper: str, saved: int):
    ctx.size_saved[helper] = ctx.size_saved.get(helper, 0) + saved
# FORCE = "rq" / "packed" gives every shared-kernel layer that format in size mode (tests of
# layers too small for the rule to pick it)
FORCE: str | None = None


def bits_needed(rows: np.ndarray) -> np.ndarray:
    """Per row, the fewest two's-complement bits (1..8) holding all its int8 values."""
    rows = np.asarray(rows, np.int64)
    lo, hi = rows.min(axis=1, initial=0), rows.max(axis=1, initial=0)
    need = np.full(rows.shape[0], 8, np.int64)
    for b in range(7, 0, -1):       # fitting in b bits implies fitting in b + 1
        need = np.where((lo >= -(1 << (b - 1))) & (hi <= (1 << (b - 1)) - 1), b, need)
    return need


def pack_rows(rows: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Row c's values in bits[c] bits each (0: none), LSB first, the row padded to whole
    bytes."""
    out = []
    for row, b in zip(np.asarray(rows, np.int64), bits.tolist()):
        u = (row & ((1 << b) - 1)).astype(np.uint64)
        stream = np.zeros(len(row) * b, np.uint8)
        for i in range(b):
            stream[i::b] = (u >> np.uint64(i)) & np.uint64(1)
        out.append(np.packbits(stream, bitorder="little"))
    return np.concatenate(out) if out else np.zeros(0, np.uint8)


def unpack_rows(data: np.ndarray, bits: np.ndarray, k: int) -> np.ndarray:
    """The inverse of pack_rows (what the C unpacker computes), for the encoder's self-check."""
    rows, pos = [], 0
    for b in bits.tolist():
        if b == 0:
            rows.append(np.zeros(k, np.int64))
            continue
        n = (k * b + 7) // 8
        stream = np.unpackbits(data[pos:pos + n], bitorder="little")[:k * b].reshape(k, b)
        u = (stream.astype(np.int64) << np.arange(b)).sum(axis=1)
        rows.append(np.where(u >= 1 << (b - 1), u - (1 << b), u))
        pos += n
    return np.array(rows, np.int64).reshape(len(rows), k)


def rq_arrays(fbias, mult, rshift, radd, out_zp: int):
    """meta rshift part and the (bias, multiplier) pairs of the compact rows; checks that radd
    is what eerie_conv_unpack_rq recomputes."""
    fbias, mult = np.asarray(fbias, np.int64), np.asarray(mult, np.int64)
    rshift, radd = np.asarray(rshift, np.int64), np.asarray(radd, np.int64)
    if np.any((rshift < 1) | (rshift > 31)):
        return None
    derived = (np.int64(1) << (rshift - 1)) + np.int64(out_zp) * (np.int64(1) << rshift)
    const = mult == 0
    if np.any(const & (radd % 2 != 1)) or np.any(~const & (radd != derived)):
        return None
    bias = np.where(const, (radd - 1) // 2, fbias)
    if np.any(np.abs(bias) >= 2 ** 31):
        return None
    return np.stack([bias, mult], axis=1).astype(np.int32)


def block_pairs(kp: int, ocp: int) -> int:
    """Pairs of channels per unpacked block: as many as BLOCK_BYTES holds, at least one."""
    return max(1, min(ocp // 2, BLOCK_BYTES // (2 * kp + 32)))


def size_vars(ctx, wflat, fbias, values, k: int, kp: int, ocp: int, out_c: int, out_zp: int,
              what_w: str, formats=("rq", "packed")) -> dict | None:
    """The layer's size-mode format (dict for conv2d_s8's templates) or None to keep the
    default one. wflat: [out_c][k] int8 weights (dead channels zeroed), fbias: folded bias
    (zero for constant channels), values: fast_requant_values(...) with the zero point folded."""
    mult, rshift, radd, zp_after = values
    if zp_after != 0:
        return None
    bm = rq_arrays(fbias, mult, rshift, radd, out_zp)
    if bm is None:
        return None
    const = np.asarray(mult, np.int64) == 0     # output independent of the weights
    bits = np.where(const, 0, bits_needed(wflat))
    packed = pack_rows(wflat, bits)
    if not np.array_equal(unpack_rows(packed, bits, k), np.where(const[:, None], 0, wflat)):
        raise AssertionError("packed conv weights do not decode to the originals")
    default = ocp * kp + 16 * ocp
    sizes = {"rq": ocp * kp + 9 * out_c + CODE_RQ,
             "packed": packed.size + 9 * out_c + CODE_PACKED}
    if "eerie_conv_unpack_rq" in ctx.size_off:
        return None
    if "eerie_conv_unpack_w" in ctx.size_off:
        formats = tuple(f for f in formats if f != "packed")
    sizes = {f: n for f, n in sizes.items() if f in formats}
    if not sizes:
        return None
    forced = FORCE if FORCE in sizes else None
    fmt = forced or min(sizes, key=sizes.get)
    if forced is None and default - sizes[fmt] < MIN_SAVED:
        return None
    _credit(ctx, "eerie_conv_unpack_rq", default - sizes[fmt])
    if fmt == "packed":
        _credit(ctx, "eerie_conv_unpack_w", min(sizes.get("rq", default), default) - sizes[fmt])
    meta = np.where(const, 0, (bits - 1) | (np.asarray(rshift, np.int64) << 3)).astype(np.uint8)
    v = dict(size_fmt=fmt, rq_meta=ctx.const(meta, "uint8_t", "meta", "per channel: weight bits "
                                              "- 1 | rshift << 3"),
             rq_bm=ctx.const(bm, "int32_t", "bias_mult", "per channel: folded bias (for "
                             "multiplier 0: the constant output), multiplier"),
             rq_zp=0, kk=k)
    saved = default - sizes[fmt]
    if fmt == "rq":
        wdata = pad_to(wflat, (ocp, kp)).reshape(ocp // 2, 2, kp // 4, 4).transpose(0, 2, 1, 3)
        words = np.frombuffer(np.ascontiguousarray(wdata, np.int8).tobytes(), "<i4").astype(np.int32)
        v["weights"] = ctx.const(words, "int32_t", "weights", what_w + ", 4 taps per word")
        v["size_why"] = (f"weights int8, requantization 9 B per channel (size: {saved:,} B "
                         f"saved; packed, the {out_c * k:,} weight bytes would take "
                         f"{packed.size:,} B and the unpacking code)")
        return v
    bp = block_pairs(kp, ocp)
    hist = np.bincount(bits, minlength=9)
    # 4 zero bytes after the rows: the unpacker's last group of a row may read that far ahead
    v.update(packed=ctx.const(np.concatenate([packed, np.zeros(4, np.uint8)]), "uint8_t",
                              "weights_packed", what_w + ", row c in bits[c] bits per tap (two's "
                              "complement, LSB first, rows byte-aligned), 4 bytes of padding"),
             bp=bp, nblocks=-(-ocp // (2 * bp)))
    v["size_why"] = (f"weights packed {packed.size:,} B of {out_c * k:,} (bits per channel "
                     + ", ".join(f"{b}: {n}" for b, n in enumerate(hist.tolist()) if n)
                     + f"; size: {saved:,} B saved, unpacked in {v['nblocks']} block(s) of "
                     f"{2 * bp} channels)")
    return v


def size_lowering(v: dict) -> tuple[str, int, bool]:
    """(C body, scratch bytes, whether the layer may run in place) of a size-mode layer; v as
    conv2d_s8.c.j2 takes it plus size_vars' entries."""
    kp, ocp = v["kp"], v["ocp"]
    base = 4 * kp + (0 if v["direct"] else kp)          # the columns (and window bytes)
    if v["size_fmt"] == "rq":
        return (rq_preamble(v, base) + render("kernels/conv2d_s8.c.j2", **{**v, "rq_table": "rqs"}),
                base + 16 * ocp, True)
    bp = v["bp"]
    qoff = base
    woff = qoff + 32 * bp
    scratch = woff + 2 * kp * bp
    body = render("kernels/conv2d_s8_packed.c.j2", **{**v, "qoff": qoff, "woff": woff,
                                                       "weights": "wb", "rq_table": "qb"})
    # one block: unpacked once, then the default loop order (a pixel's channels all at once)
    return body, scratch, v["nblocks"] == 1


def dw_size_vars(ctx, fbias, values, out_zp: int, channels: int, wk) -> dict | None:
    """--optimize size for the DSP depthwise kernels' table path: the requantization table
    (16 B per channel) from 9 B per channel (meta = rshift << 3, bias and multiplier), and the
    weights, which the kernels read doubled and sign-extended to int16 (2 B per weight), as
    the int8 originals [taps][channels]; both expanded into scratch once per call by
    eerie_dw_unpack_rq and eerie_dw_unpack_w. None when that does not save MIN_SAVED bytes
    or the table's radd is not the derived one. wk: [taps][channels] int8 (dead channels
    zeroed)."""
    mult, rshift, radd, zp_after = values
    saved_rq = 7 * channels - CODE_RQ
    if zp_after != 0 or saved_rq < MIN_SAVED or "eerie_dw_unpack_rq" in ctx.size_off:
        return None
    bm = rq_arrays(fbias, np.broadcast_to(mult, (channels,)), np.broadcast_to(rshift, (channels,)),
                   np.broadcast_to(radd, (channels,)), out_zp)
    if bm is None:
        return None
    _credit(ctx, "eerie_dw_unpack_rq", saved_rq)
    meta = np.where(np.broadcast_to(mult, (channels,)) == 0, 0,
                    np.broadcast_to(np.asarray(rshift, np.int64), (channels,)) << 3).astype(np.uint8)
    v = dict(rq_meta=ctx.const(meta, "uint8_t", "meta", "per channel: rshift << 3 (0: multiplier 0)"),
             rq_bm=ctx.const(bm, "int32_t", "bias_mult", "per channel: folded bias (for "
                             "multiplier 0: the constant output), multiplier"),
             rq_table="dwq", size_why=f"requantization 9 B per channel (size: {saved_rq:,} B saved)")
    saved_w = wk.size - CODE_RQ
    if saved_w >= MIN_SAVED and "eerie_dw_unpack_w" not in ctx.size_off:
        _credit(ctx, "eerie_dw_unpack_w", saved_w)
        v.update(wk8=ctx.const(np.asarray(wk, np.int8), "int8_t", "weights",
                               "int8 weights [tap][channel]"), ntaps=wk.shape[0], wexp="dww")
        v["size_why"] = (f"weights int8 (expanded at run time), requantization 9 B per channel "
                         f"(size: {saved_rq + saved_w:,} B saved)")
    return v


def dw_size_preamble(v: dict, offset: int) -> tuple[str, int]:
    """The C lines before a size-mode depthwise layer's body (its table, and with wk8 its
    weights, into scratch from offset) and the scratch bytes they take."""
    c = v["in_c"]
    out = ("/* --optimize size: requantization table expanded from 9 bytes per channel */\n"
           f"int32_t *const dwq = (int32_t *)(scratch + {offset});\n"
           f"eerie_dw_unpack_rq({v['rq_meta']}, {v['rq_bm']}, {c}, {v['out_zp']}, dwq);\n")
    if not v.get("wk8"):
        return out, 16 * c
    return out + ("/* and the weights, doubled and sign-extended from int8 */\n"
                  f"int32_t *const dww = (int32_t *)(scratch + {offset + 16 * c});\n"
                  f"eerie_dw_unpack_w({v['wk8']}, {v['ntaps']}, {c}, dww);\n"), 16 * c + 2 * c * v["ntaps"]


def rq_preamble(v: dict, offset: int) -> str:
    """The C lines before an "rq" layer's body (rendered with rq_table = "rqs"): its
    requantization rows (16 * ocp bytes) into scratch at offset (a multiple of 4)."""
    return ("/* --optimize size: requantization rows expanded from 9 bytes per channel */\n"
            f"int32_t *const rqs = (int32_t *)(scratch + {offset});\n"
            f"eerie_conv_unpack_rq({v['rq_meta']}, {v['rq_bm']}, {v['out_c']}, {v['out_zp']}, rqs);\n")
