"""Which weight format a FULLY_CONNECTED layer uses on DSP targets (cortex-m4/m7/m33).

Formats (layouts and proofs: _fc_pack.py; kernels: templates/helpers/fc_dsp*.c.j2):

* "s8":   int8 bytes, 4 rows per block (fc_dsp): 21 instructions per 16 MACs;
* "mix":  int8 rows mixed in pairs (fc_dsp_mix): 17 per 16 MACs, same bytes as s8;
* "s16":  weights stored sign-extended, 4 rows per block (fc_dsp_s16): 15 per 16 MACs, twice
          the bytes (--optimize speed only);
* "p4":   4-bit fields, 4 rows per block (fc_dsp_p4): 18 per 16 MACs, half the bytes,
          plus |k| correction entries (1 B, 2 B for depths over 256; ~5 instructions each)
          per weight w' + 16 k outside [-8, 8);
* "p556": 5/5/6-bit fields, 3 rows per block (fc_dsp_p556): 14 per 12 MACs, 2/3 of the
          bytes, plus corrections for weights outside [-16, 16) (rows 0, 1) or [-32, 32) (row 2;
          rows are reordered so the third of them with most to gain get the 6-bit field);
  split:  p556 with its rows of many corrections int8 ("mix", else "s8") in a second kernel
          call, whose outputs are scattered to their rows (encode_split, heavy_rows).

The rule: the int8 format is "mix" when its bounds hold, else "s8". A packed format replaces
it when it saves at least MIN_SAVED_BYTES of flash and at least BYTES_PER_INSTRUCTION bytes
for every instruction per inference it adds (estimated below, per batch row times batches);
of those that qualify the smallest wins. The same price applies per row of a p556 layer: the
rows whose packing saves less than BYTES_PER_INSTRUCTION bytes per instruction it adds are
int8 (the split replaces the whole-layer p556 when it runs fewer instructions for at most
that many bytes per instruction saved). Packing only pays for large layers whose weights
are mostly small (ad01's layers 0, 2 and 3); small layers (the classifier heads of kws, vww,
resnet) and layers with wide weights stay int8.

--optimize speed stores every layer's weights sign-extended ("s16", fewest instructions),
--optimize size takes the smallest format whenever it saves at least SIZE_MIN_SAVED_BYTES
(about a format kernel's code); balanced (the default) is the rule above.

PACK = False keeps every layer int8; FORCE = "s8" / "mix" / "p4" / "p556" gives every layer
that format where its bounds hold (else int8), "p556+s8" p556 with every row that has a
correction int8 (a split), for tests of small layers the rule would leave alone.
"""
from __future__ import annotations

import numpy as np

from ._dsp import pad_to, round_up
from ._fc_pack import encode

PACK = True
FORCE: str | None = None

MIN_SAVED_BYTES = 2048
# --optimize size: a packed format must save at least about its kernel's code (each of
# fc_dsp_p4 / fc_dsp_p556 is under 1 KiB of Thumb-2), else the firmware grows (vww's classifier)
SIZE_MIN_SAVED_BYTES = 1024
# a packed layer (or row of a p556 layer) must save at least 1 B of flash per instruction per
# inference it adds: on ad01 (M4) this keeps packed the layers that buy most bytes per
# instruction (0: 2.4 B, 3: 1.5, 2: 1.2), leaves int8 layers 1 (0.96) and 6 (0.59) and 23
# rows of layer 0: 363K -> 342K instructions for +14 KB, the firmware 241,528 B, under issue
# 6's flash target (0.8x TFLM's, 242,813 B)
BYTES_PER_INSTRUCTION = 1.0

# Instruction estimates per call (one batch row), fitted to per-layer counts on the
# Cortex-M4 (bench/profile_layers.py ad01_int8: within 1% on its large layers, 5% on the
# small ones): the inner loop per group of 4 inputs and block of rows (with the loop's
# share of SUBS/BNE), the rest of a block (bias, requantization, stores; for the packed
# formats also each row's correction-list set-up), each correction entry, and the input
# sum of the packed formats per group.
PER_GROUP = {"s8": 21.5, "mix": 17.5, "p4": 18.5, "p556": 14.5, "s16": 15.5}
PER_BLOCK = {"s8": 63, "mix": 67, "p4": 128, "p556": 117, "s16": 63}
PER_ENTRY = 5
SUM_PER_GROUP = 5
# a split layer's second call and its scatter of the int8 rows' outputs to their rows
SCATTER_CALL = 60
SCATTER_PER_ROW = 4


def estimate_instructions(enc: dict, batches: int) -> int:
    """Estimated instructions per inference of the layer in format enc["fmt"] (with its
    int8 rows and their scatter when split)."""
    fmt = enc["fmt"]
    groups, blocks = enc["dp"] // 4, enc["up"] // enc["rows"]
    per_row = blocks * (groups * PER_GROUP[fmt] + PER_BLOCK[fmt])
    if fmt in ("p4", "p556"):
        per_row += groups * SUM_PER_GROUP + enc["outliers"] * PER_ENTRY
    n = batches * per_row
    if "split" in enc:
        n += estimate_instructions(enc["split"]["enc"], batches) \
            + batches * (SCATTER_CALL + SCATTER_PER_ROW * enc["split"]["rows"].size)
    return int(round(n))


def flash_bytes(enc: dict) -> int:
    """Bytes of the layer's format-dependent constants: weights, correction lists, row
    order, bias (and the int8 rows' constants and output rows when split)."""
    n = 4 * enc["weights"].size + 4 * enc["up"]
    if "fix" in enc:
        n += 4 * enc["fix_n"].size + enc["fix"].itemsize * max(1, enc["fix"].size)
    if "perm" in enc:
        n += 2 * enc["perm"].size
    if "split" in enc:
        n += flash_bytes(enc["split"]["enc"]) + 2 * enc["split"]["rows"].size
    return n


def heavy_rows(enc: dict) -> np.ndarray:
    """Output rows of a p556 encoding that the rule itself would rather keep int8: rows
    whose packing saves fewer than BYTES_PER_INSTRUCTION bytes per instruction it adds (its
    share of the packed weights, correction lists, count and row table against an int8 row;
    instructions from the cost model above, the scatter included). Those are the rows with
    many corrections (each costs PER_ENTRY instructions and its column's bytes): on ad01's
    first layer 21 rows with 17 to 131 corrections, 790 of its 1,183."""
    dp, groups = enc["dp"], enc["dp"] // 4
    counts = (enc["fix_n"] & 0xFFFF).astype(np.int64) + (enc["fix_n"] >> 16)
    extra = (groups * (PER_GROUP["p556"] / 3 - PER_GROUP["mix"] / 4)
             + PER_BLOCK["p556"] / 3 - PER_BLOCK["mix"] / 4 + SCATTER_PER_ROW + PER_ENTRY * counts)
    saved = dp - 2 * dp / 3 - 4 - 2 - 2 - enc["fix"].itemsize * counts
    heavy = (saved < BYTES_PER_INSTRUCTION * extra)[:enc["perm"].size]
    return np.sort(enc["perm"][heavy].astype(np.int64))


def encode_split(w: np.ndarray, bias: np.ndarray, rows: np.ndarray) -> dict | None:
    """p556 for every row but `rows` (output rows), which are int8 ("mix" when its bounds
    hold, else "s8") in a second kernel call whose outputs are scattered to their rows; the
    p556 part's perm maps to output rows. None when a part would be empty or cannot be
    encoded."""
    keep = np.setdiff1d(np.arange(w.shape[0]), rows)
    if rows.size == 0 or keep.size == 0:
        return None
    enc = encode("p556", w[keep], bias[keep])
    if enc is None:
        return None
    enc["perm"] = keep[enc["perm"].astype(np.int64)].astype(np.uint16)
    part = encode("mix", w[rows], bias[rows]) or encode_s8(w[rows])
    enc["split"] = dict(rows=rows.astype(np.uint16), enc=part)
    return enc


def encode_s8(w: np.ndarray) -> dict:
    """The plain int8 layout of helpers/fc_dsp.c.j2: [up/4][dp/4][4 rows][4 inputs] bytes."""
    units, depth = w.shape
    up, dp = round_up(units, 4), round_up(depth, 4)
    wl = pad_to(w.astype(np.int8), (up, dp)).reshape(up // 4, 4, dp // 4, 4).transpose(0, 2, 1, 3)
    return dict(fmt="s8", rows=4, up=up, dp=dp,
                weights=np.ascontiguousarray(wl).reshape(-1).view("<i4"))


def encode_s16(w: np.ndarray) -> dict:
    """The sign-extended layout of helpers/fc_dsp_s16.c.j2: per block of 4 rows and group of
    4 inputs, per row the words (w0, w2) and (w1, w3) as int16 halves (the halfword order
    SXTB16 gives the input word)."""
    units, depth = w.shape
    up, dp = round_up(units, 4), round_up(depth, 4)
    t = pad_to(w.astype(np.int64), (up, dp)).reshape(up // 4, 4, dp // 4, 4).transpose(0, 2, 1, 3) & 0xFFFF
    words = np.stack([t[..., 0] | t[..., 2] << 16, t[..., 1] | t[..., 3] << 16], axis=-1)
    return dict(fmt="s16", rows=4, up=up, dp=dp, weights=words.astype(np.uint32).view(np.int32).reshape(-1))


def choose(w: np.ndarray, bias: np.ndarray, batches: int, optimize: str = "balanced") -> dict:
    """The encoding (see _fc_pack.py) this layer uses, with "instructions" and "bytes"
    estimates added and "why" (for report.md); w: int8 weights as int64 [units, depth], bias:
    folded bias. optimize (--optimize): "balanced" is the rule above; "speed" stores the
    weights sign-extended (fewest instructions); "size" takes the smallest format whatever
    it costs."""
    if FORCE == "p556+s8":   # every row with a correction int8 (tests of the split)
        full = encode("p556", w, bias)
        forced = None if full is None else encode_split(
            w, bias, np.sort(full["perm"][full["fix_n"][:full["perm"].size] != 0].astype(np.int64)))
        if forced is not None:
            forced["why"] = f"forced ({FORCE})"
            return forced
    elif FORCE is not None:
        forced = {"s8": encode_s8, "s16": encode_s16}[FORCE](w) if FORCE in ("s8", "s16") \
            else encode(FORCE, w, bias)
        if forced is not None:
            forced["why"] = f"forced ({FORCE})"
            return forced
    if optimize == "speed":
        best = encode_s16(w)
        best.update(instructions=estimate_instructions(best, batches), bytes=flash_bytes(best),
                    why="int16: fewest instructions (speed: twice the bytes of int8)")
        return best
    base = encode("mix", w, bias) or encode_s8(w)
    base.update(instructions=estimate_instructions(base, batches), bytes=flash_bytes(base))
    best = base
    base["why"] = (
        "int8: no packed format saves enough" if optimize == "balanced"
        else f"int8: no packed format saves {SIZE_MIN_SAVED_BYTES} B (its kernel's code)")
    candidates = []
    for fmt in (("p4", "p556") if PACK else ()):
        enc = encode(fmt, w, bias)
        if enc is None:
            continue
        candidates.append(enc)
        if fmt == "p556" and optimize == "balanced":   # its heavy rows int8
            split = encode_split(w, bias, heavy_rows(enc))
            if split is not None:
                candidates.append(split)
    for enc in candidates:
        enc.update(instructions=estimate_instructions(enc, batches), bytes=flash_bytes(enc))
        saved = base["bytes"] - enc["bytes"]
        extra = enc["instructions"] - base["instructions"]
        if optimize == "size":
            ok = saved >= SIZE_MIN_SAVED_BYTES
            why = f"smallest: saves {saved:,} B for {extra:+,} instructions"
        else:
            ok = saved >= MIN_SAVED_BYTES and saved >= BYTES_PER_INSTRUCTION * extra
            why = f"saves {saved:,} B for {extra:+,} instructions (>= {MIN_SAVED_BYTES} B and " \
                  f">= {BYTES_PER_INSTRUCTION} B per instruction)"
        if "split" in enc:
            why += f"; {enc['split']['rows'].size} rows with many corrections int8 (< " \
                   f"{BYTES_PER_INSTRUCTION} B per instruction packed)"
        if ok and _better(enc, best):
            enc["why"] = why
            best = enc
    return best


def _better(enc: dict, best: dict) -> bool:
    """Of two qualifying encodings the smaller wins, but a split one replaces the
    whole-layer p556 it was built from when it runs fewer instructions for at most
    BYTES_PER_INSTRUCTION bytes more per instruction saved (it gives up the rows that pay
    least for their bytes)."""
    if "split" in enc and best["fmt"] == "p556" and "split" not in best:
        fewer = best["instructions"] - enc["instructions"]
        return fewer > 0 and enc["bytes"] - best["bytes"] <= BYTES_PER_INSTRUCTION * fewer
    return (enc["bytes"], enc["instructions"]) < (best["bytes"], best["instructions"])
