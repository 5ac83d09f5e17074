"""FULLY_CONNECTED weight formats of the DSP targets (eerie_c/kernels/_fc_pack.py, the choice
in _fc_formats.py, kernels templates/helpers/fc_dsp*.c.j2) vs TFLM, bit for bit.

Weights are engineered to reach every case of the packed formats: all in range, outliers of
both signs, the extremes -128 / -127 / 127 (the largest |k| of every field width), rows with
no outlier and rows made only of outliers, an all-zero row, depth not a multiple of 4 or 8,
units not a multiple of 3 or 4, per-tensor and per-channel weights, fused activations.
_fc_formats.FORCE makes small layers use a format the size rule would leave alone; the C is
built for cortex-m4 and run on the host (plain-C branch, UBSan, source proof) and in QEMU on
mps2-an386 (the Thumb-2 assembly).
"""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model
from eerie_c.kernels import _fc_formats, _fc_pack
from tflite_builder import ACT, ModelBuilder

from test_dsp_kernels import check_dsp_board, dsp_target_run

FORMATS = ["s8", "mix", "p4", "p556", "s16", "p556+s8"]
BOARD_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm", "make")
needs_board = pytest.mark.skipif(any(shutil.which(t) is None for t in BOARD_TOOLS),
                                 reason="needs arm-none-eabi-gcc, make and qemu-system-arm")


def engineered_weights(units: int, depth: int, seed: int = 0, minus128: bool = True) -> np.ndarray:
    """Mostly small weights (in every field) with outliers placed on purpose."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-6, 7, (units, depth))
    extremes = [127, -127, 100, -100, 16, -17, 33, -33, 8, -9, 15, -16, 31, -32]
    if minus128:
        extremes.append(-128)
    for r in range(units):
        kind = r % 5
        if kind == 1:      # a few outliers of both signs, extremes included
            cols = rng.choice(depth, min(depth, 6), replace=False)
            w[r, cols] = rng.choice(extremes, cols.size)
        elif kind == 2:    # a row made only of outliers
            w[r] = rng.choice(extremes, depth)
        elif kind == 3 and r > 5:
            w[r] = 0       # an all-zero row: a constant output channel
        # kind 0 and 4: no outlier at all
    w[0, -1] = 127         # the last (padded-group) column carries an outlier
    return w


def fc_weights_model(w: np.ndarray, batches: int, act: str, per_channel: bool, seed: int = 0) -> bytes:
    units, depth = w.shape
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input([batches, depth], "int8", scale=0.07, zero_point=-5)
    wscale = rng.uniform(0.004, 0.012, units) if per_channel else [0.008]
    wt = mb.const(w, "int8", scale=wscale, zero_point=[0] * len(wscale), axis=0)
    bscale = 0.07 * np.asarray(wscale, np.float32)
    b = mb.const(rng.integers(-3000, 3000, units), "int32", scale=bscale,
                 zero_point=[0] * len(bscale), axis=0)
    y = mb.tensor([batches, units], "int8", scale=0.05, zero_point=3)
    mb.op("FULLY_CONNECTED", [x, wt, b], [y], "FullyConnectedOptions", fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def kernels_used(c_source: str) -> list[str]:
    """The FC kernels called, in layer order ("s8", "mix", "p4", "p556"; a split layer's
    int8 rows: a second call)."""
    return [m.removeprefix("eerie_fc_") for m in re.findall(r"(eerie_fc_\w+)\(xs", c_source)]


def check_kernels(c_source: str, fmt: str) -> None:
    """The layer uses format fmt ("p556+s8": p556 with its rows that have corrections in a
    second, int8 call, scattered to their rows)."""
    used = kernels_used(c_source)
    if fmt == "p556+s8":
        assert used in (["p556", "mix"], ["p556", "s8"]), used
        assert re.search(r"out0\[b \* \d+ \+ \w+_rows\[i\]\] = ys\[i\];", c_source)
    else:
        assert used == [fmt], used


CASES = [
    # batches, units, depth, act, per_channel
    (1, 11, 37, "RELU", False),        # units % 4 = 3, % 3 = 2; depth % 4 = 1
    (2, 7, 44, "NONE", True),          # 11 groups: the 4-group loop, a pair and a single group
    (1, 10, 130, "RELU6", False),      # units % 4 = 2 (the mix kernel's half block), % 3 = 1
    (3, 13, 8, "RELU_N1_TO_1", True),  # one group of 4 inputs twice; 13 = 3 * 4 + 1
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}-u{c[1]}-d{c[2]}-{c[3]}-{'pc' if c[4] else 'pt'}")
def test_fc_format_host(tmp_path, monkeypatch, fmt, case):
    batches, units, depth, act, per_channel = case
    w = engineered_weights(units, depth, seed=units, minus128=fmt != "mix")
    model = fc_weights_model(w, batches, act, per_channel)
    monkeypatch.setattr(_fc_formats, "FORCE", fmt)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    check_kernels(compile_model(p, target="cortex-m4", name="m").files["m.c"], fmt)
    xs = [random_inputs([batches, depth], "int8", 4, seed=3)]
    ref = tflm_run(model, xs)[0]
    assert len(np.unique(ref)) > 8, "outputs should not all saturate"
    np.testing.assert_array_equal(dsp_target_run(model, xs, tmp_path)[0], ref)


@needs_board
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("fmt", ["mix", "p4", "p556", "s16", "p556+s8"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2]], ids=["u11-d37", "u7-d44", "u10-d130"])
def test_fc_format_on_cortex_m4(tmp_path, monkeypatch, fmt, case, board):
    """The same layers on the real instructions (QEMU mps2-an386 and the M7, mps2-an500)."""
    batches, units, depth, act, per_channel = case
    w = engineered_weights(units, depth, seed=units, minus128=fmt != "mix")
    model = fc_weights_model(w, batches, act, per_channel)
    monkeypatch.setattr(_fc_formats, "FORCE", fmt)
    check_kernels(check_dsp_board(tmp_path, model, [batches, depth], board, seed=4, n=3), fmt)


def decode(enc: dict, units: int, depth: int) -> np.ndarray:
    """The weights back from an encoding (the kernels' arithmetic, in numpy)."""
    lanes = enc["weights"].view("<i2").astype(np.int64)
    dp, nrow = enc["dp"], enc["rows"]
    order = np.argsort([0, 2, 1, 3])               # word lanes (0, 2, 1, 3) -> inputs 0..3
    if enc["fmt"] == "mix":
        full = (units // 4 if units % 4 in (1, 2) else enc["up"] // 4)
        pairs = lanes[:full * dp * 2].reshape(full, dp // 4, 2, 4)[..., order].transpose(0, 2, 1, 3)
        h = pairs.reshape(-1, dp)
        if units % 4 in (1, 2):
            h = np.concatenate([h, lanes[full * dp * 2:].reshape(dp // 4, 4)[:, order].reshape(1, dp)])
        wa = ((h & 0xff) ^ 0x80) - 0x80
        rows = np.stack([wa, (h - wa) >> 8], axis=1).reshape(-1, dp)
        return rows[:units, :depth]
    bits = (4, 4, 4, 4) if enc["fmt"] == "p4" else (5, 5, 6)
    h = lanes.reshape(-1, dp // 4, 4)[..., order].reshape(-1, dp)
    rows, shift = [], 0
    for r, b in enumerate(bits):
        f = (h >> shift) & ((1 << b) - 1)
        rows.append(f - (1 << (b - 1)) if r < nrow - 1 else ((f ^ (1 << (b - 1))) - (1 << (b - 1))))
        shift += b
    w = np.stack(rows, axis=1).reshape(-1, dp)
    assert enc["fix"].dtype == (np.uint8 if dp <= 256 else np.uint16)
    pos = 0
    for r, counts in enumerate(enc["fix_n"].astype(np.int64)):
        n_plus, n_minus = counts & 0xffff, counts >> 16
        for c in enc["fix"][pos:pos + n_plus].astype(np.int64):
            w[r, c] += 1 << bits[r % nrow]
        for c in enc["fix"][pos + n_plus:pos + n_plus + n_minus].astype(np.int64):
            w[r, c] -= 1 << bits[r % nrow]
        pos += n_plus + n_minus
    assert pos == enc["fix"].size
    return w[:units, :depth]


@pytest.mark.parametrize("fmt", ["mix", "p4", "p556"])
@pytest.mark.parametrize("units,depth", [(11, 37), (10, 130), (13, 8), (1, 4), (2, 64), (128, 640)])
def test_encodings_round_trip(fmt, units, depth):
    w = engineered_weights(units, depth, seed=depth, minus128=fmt != "mix")
    enc = _fc_pack.encode(fmt, w, np.zeros(units, np.int64))
    assert enc is not None
    if fmt == "p556":   # rows reordered: the units // 3 with most to gain have the 6-bit field
        perm = enc["perm"].astype(np.int64)
        assert sorted(perm) == list(range(units))
        w = w[perm]
    np.testing.assert_array_equal(decode(enc, units, depth), w)


@pytest.mark.parametrize("units,depth", [(11, 37), (10, 130), (128, 640)])
def test_split_round_trip(units, depth):
    """A split p556 layer: its packed rows (perm: output rows) and its int8 rows (split
    rows) give back every weight once; the rule's heavy rows are those with most corrections."""
    w = engineered_weights(units, depth, seed=depth)
    full = _fc_pack.encode("p556", w, np.zeros(units, np.int64))
    heavy = _fc_formats.heavy_rows(full)
    with_fix = np.sort(full["perm"][full["fix_n"][:units] != 0].astype(np.int64))
    rows = heavy if 0 < heavy.size < units else with_fix   # small layers: every row is heavy
    enc = _fc_formats.encode_split(w, np.zeros(units, np.int64), rows)
    assert enc is not None and 0 < rows.size < units
    perm, part = enc["perm"].astype(np.int64), enc["split"]["enc"]
    assert sorted(np.concatenate([perm, enc["split"]["rows"]]).tolist()) == list(range(units))
    np.testing.assert_array_equal(decode(enc, perm.size, depth), w[perm])
    if part["fmt"] == "mix":
        np.testing.assert_array_equal(decode(part, rows.size, depth), w[rows])
    counts = (full["fix_n"] & 0xFFFF).astype(np.int64) + (full["fix_n"] >> 16)
    by_row = dict(zip(full["perm"].tolist(), counts.tolist()))
    if rows is heavy:   # every heavy row has more corrections than any row kept packed
        assert min(by_row[r] for r in heavy) > max(by_row[r] for r in perm)


def test_bounds_fall_back():
    """Each format's compile-time proof refuses what its int32 arithmetic could not do
    exactly, and the choice then keeps a format that can."""
    zero = np.zeros(4, np.int64)
    # mix: -128 in the second row of a pair with a negative first-row weight leaves int16
    w = np.ones((4, 16), np.int64)
    w[0, 3], w[1, 3] = -1, -128
    assert _fc_pack.encode("mix", w, zero) is None
    assert _fc_formats.choose(w, zero, 1)["fmt"] == "s8"
    # mix: 128 * sum |256 w_B + w_A| reaches 2^31
    w = np.full((2, 1024), 127, np.int64)
    assert _fc_pack.encode("mix", w, zero[:2]) is None
    assert _fc_pack.encode("mix", w[:, :256], zero[:2]) is not None
    # mix: the mixed sums fit (row A's weights cancel a little of row B's) but 256 S_B does not
    w = np.zeros((2, 520), np.int64)
    w[1, :516], w[1, 516], w[0, 0] = 127, 4, -1          # sum |w_B| = 65536: 128 * 256 * it = 2^31
    assert 128 * np.abs(256 * w[1] + w[0]).sum() < 2 ** 31
    assert _fc_pack.encode("mix", w, zero[:2]) is None
    w[1, 516] = 3
    assert _fc_pack.encode("mix", w, zero[:2]) is not None
    # packed: the mixed word sums reach 2^31 (every lane -32768)
    w = np.tile(np.array([[-16], [-16], [-32]], np.int64), (1, 600))   # row 2 takes the 6 bits
    assert _fc_pack.encode("p556", w, zero[:3]) is None
    assert _fc_pack.encode("p556", w[:, :400], zero[:3]) is not None
    # packed: a column index needs more than 11 bits
    assert _fc_pack.encode("p4", np.zeros((4, 2048), np.int64), zero) is None
    assert _fc_pack.encode("p4", np.zeros((4, 2044), np.int64), zero) is not None
    # packed: a row needs more than 65535 columns of one sign (each correction |k| times)
    w = np.zeros((4, 2044), np.int64)
    w[0] = np.tile([1, -1], 1022) * 127                 # p4: k = +-8 at 1022 columns each
    assert _fc_pack._corrections(np.array([[0] * 3 + [7] * 9362 + [1]]), 9366) is not None  # 65535
    assert _fc_pack._corrections(np.array([[0] * 3 + [-7] * 9362 + [-2]]), 9366) is None   # 65536
    assert _fc_pack.encode("p4", w, zero) is not None
    # packed: a row's sums with a huge bias
    w = np.ones((4, 8), np.int64)
    assert _fc_pack.encode("p4", w, np.array([2 ** 31 - 10, 0, 0, 0])) is None


def test_format_choice_on_shared_models(models_dir, monkeypatch):
    """ad01's layers 0, 2 and 3 are packed (what its flash target needs: they save the most
    bytes per instruction added; layer 0 with its rows of many corrections int8, a second
    call), layer 1 and 6 (under 1 B per instruction), its wide-weight layers and every FC
    layer of the other models stay int8 (mixed rows); PACK = False and the M55 (whose FC
    layers use Helium) keep int8."""
    ad01 = models_dir / "ad01_int8.tflite"
    src = compile_model(ad01, target="cortex-m4", name="m").files["m.c"]
    used = kernels_used(src)
    assert used[:5] == ["p556", "mix", "mix", "p4", "p4"], used
    assert used[5:] == ["mix"] * 6, used
    assert "ys, 6, 160, 23, 0" in src   # layer 0: 23 of its 128 rows int8 (6 blocks of 4)
    for model in ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant"):
        src = compile_model(models_dir / f"{model}.tflite", target="cortex-m7", name="m").files["m.c"]
        assert set(kernels_used(src)) == {"mix"}, model
    monkeypatch.setattr(_fc_formats, "PACK", False)
    assert set(kernels_used(compile_model(ad01, target="cortex-m4", name="m").files["m.c"])) == {"mix"}
    assert "eerie_fc_p" not in compile_model(ad01, target="cortex-m55", name="m").files["m.c"]


def test_ad01_packed_on_host_bit_exact(models_dir, tmp_path):
    """ad01 with its chosen formats, built for cortex-m4 on the host (UBSan, source proof)."""
    model = (models_dir / "ad01_int8.tflite").read_bytes()
    xs = [random_inputs([1, 640], "int8", 6, seed=7)]
    np.testing.assert_array_equal(dsp_target_run(model, xs, tmp_path)[0], tflm_run(model, xs)[0])
