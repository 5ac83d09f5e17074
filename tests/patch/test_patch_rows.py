"""Row-band input (--input-rows, patch/rows.py) against TFLM: the image pushed row by row
(NAME_input_rows) into a ring of input rows must give the very bytes TFLM gives, for bands of
any size (1 row, uneven bands, the whole image at once through NAME_invoke), odd heights,
strides, SAME / VALID padding and dilation; the ring protocol's proof rejects corrupted rings;
the CLI refuses --input-rows without a patch stage in one line."""
import dataclasses
import subprocess

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, ODD, chain_model

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug, EerieError

CASES = [(MOBILENET, (1, 19, 23, 3), (4, (3, 2))),    # SAME, stride 2, odd height
         (MOBILENET, (1, 24, 20, 3), (3, (5, 1))),    # one tile per grid row, 5 grid rows
         (ODD, (1, 21, 18, 4), (4, (2, 3))),          # VALID, dilation, strides
         (MOBILENET, (1, 17, 9, 3), (4, (99, 2)))]    # a grid row per output row


def _ref(model, shape, n=2, seed=5):
    x = random_inputs(list(shape), "int8", n, seed=seed)
    ref = tflm_run(model, [x])
    assert np.abs(ref[0].astype(int)).max() < 128, "outputs all saturated: a weak test"
    return x, ref[0]


@pytest.mark.parametrize("layers, shape, patch", CASES)
def test_rows_bit_exact_through_invoke(tmp_path, layers, shape, patch):
    model = chain_model(shape, layers, seed=3)
    x, ref = _ref(model, shape)
    got, report = eerie_run(model, [x], tmp_path, patch=patch, input_mode="rows")
    np.testing.assert_array_equal(got[0], ref)
    rows = report["patches"]["input_rows"]
    assert rows["image_rows"] == shape[1] and rows["row_bytes"] == shape[2] * shape[3]
    assert rows["ring_rows"] <= shape[1] and rows["ring_bytes"] % 16 == 0
    assert report["inputs_in_arena"] is False
    proof = [v for v in report["verified"] if v["check"] == "patch_plan"][0]
    assert proof["input_rows"][0]["ok"]


# A harness of the test's own: pushes each image in bands of the given sizes (cycled), checks
# that every push but the one with the image's last row returns 0 and that one 1, and writes
# the outputs; a second image follows the first without a reset (the model resets itself).
DRIVER = r"""
#include <stdio.h>
#include <stdint.h>
#include "m.h"
static const int bands[] = {BANDS};
int main(void)
{
    static int8_t image[M_INPUT_HEIGHT * M_INPUT_ROW_BYTES];
    static int8_t out[M_OUTPUT0_BYTES];
    int img, k = 0;
    for (img = 0; img < NIMG; ++img) {
        int y = 0;
        if (fread(image, 1, sizeof image, stdin) != sizeof image) return 3;
        while (y < M_INPUT_HEIGHT) {
            int n = bands[k++ % (int)(sizeof bands / sizeof bands[0])];
            int last, rc;
            if (n > M_INPUT_HEIGHT - y) n = M_INPUT_HEIGHT - y;
            last = y + n == M_INPUT_HEIGHT;
            rc = m_input_rows(image + y * M_INPUT_ROW_BYTES, n, out);
            if (rc != last) { fprintf(stderr, "image %d rows %d..%d: rc %d\n", img, y, y + n - 1, rc); return 4; }
            y += n;
        }
        fwrite(out, 1, sizeof out, stdout);
    }
    return 0;
}
"""


@pytest.mark.parametrize("bands", ["1", "2, 5, 1, 3", "7", "1000"])
@pytest.mark.parametrize("layers, shape, patch", CASES[:3])
def test_rows_pushed_in_bands_bit_exact(tmp_path, layers, shape, patch, bands):
    model = chain_model(shape, layers, seed=3)
    x, ref = _ref(model, shape, n=2)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    compile_model(p, out_dir=tmp_path / "out", name="m", patch=patch, input_mode="rows")
    (tmp_path / "out" / "drv.c").write_text(DRIVER.replace("BANDS", bands).replace("NIMG", "2"))
    exe = tmp_path / "drv"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic",
                    "-o", str(exe), "drv.c", "m.c", "-lm"], cwd=tmp_path / "out", check=True)
    run = subprocess.run([str(exe)], input=x.tobytes(), capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = np.frombuffer(run.stdout, np.int8).reshape(ref.shape)
    np.testing.assert_array_equal(got, ref)


def test_header_declares_the_row_api(tmp_path):
    shape = (1, 19, 23, 3)
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model(shape, MOBILENET, seed=3))
    res = compile_model(p, out_dir=tmp_path / "out", name="m", patch=(4, (3, 2)), input_mode="rows")
    h = res.files["m.h"]
    assert "int m_input_rows(const int8_t *rows, int n_rows, int8_t *output0);" in h
    assert "void m_input_rows_reset(void);" in h and "#define M_INPUT_ROW_BYTES 69" in h
    assert "int m_invoke(const int8_t *input0, int8_t *output0);" in h
    ring = res.report["patches"]["input_rows"]["ring_bytes"]
    assert f"input: row bands of {res.report['patches']['input_rows']['ring_rows']} rows, {ring:,} B instead of 1,311 B" \
        in res.files["report.md"]


def _stage_result(tmp_path, shape=(1, 19, 23, 3), patch=(4, (3, 2))):
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model(shape, MOBILENET, seed=3))
    res = compile_model(p, name="m", patch=patch, input_mode="rows")
    return res


def _prove(res, **change):
    from eerie_c.patch.proof import prove_patches
    g, plan = res.graph, res.extra["plan"]
    op = g.ops[0]
    stage = op.attrs["patch"]
    rows = dataclasses.replace(stage.rows, **{k: v for k, v in change.items() if k != "buf_offsets"})
    bad = dataclasses.replace(stage, rows=rows, buf_offsets=change.get("buf_offsets", stage.buf_offsets))
    op.attrs["patch"] = bad
    try:
        return prove_patches(g, plan, {res.report["ops"][0]["function"]: 0})
    finally:
        op.attrs["patch"] = stage


def test_proof_accepts_the_planned_ring(tmp_path):
    res = _stage_result(tmp_path)
    assert _prove(res)["input_rows"][0]["ok"]


@pytest.mark.parametrize("what", ["ring_too_small", "span_starts_late", "span_ends_early",
                                  "buffer_over_ring", "spans_out_of_order", "wrong_row_bytes"])
def test_proof_rejects_a_corrupted_ring(tmp_path, what):
    res = _stage_result(tmp_path)
    r = res.graph.ops[0].attrs["patch"].rows
    stage = res.graph.ops[0].attrs["patch"]
    spans = [list(s) for s in r.spans]
    change = {
        "ring_too_small": {"ring_rows": r.ring_rows - 1},
        "span_starts_late": {"spans": tuple((a + (1 if k == 1 else 0), b) for k, (a, b) in enumerate(spans))},
        "span_ends_early": {"spans": tuple((a, b - (1 if k == 0 else 0)) for k, (a, b) in enumerate(spans))},
        "buffer_over_ring": {"buf_offsets": [0] + list(stage.buf_offsets[1:])},
        "spans_out_of_order": {"spans": tuple(reversed(r.spans))},
        "wrong_row_bytes": {"row_bytes": r.row_bytes - 3},
    }[what]
    with pytest.raises(CompilerBug):
        _prove(res, **change)


def test_rows_needs_a_patch_stage(tmp_path, capsys):
    from eerie_c.cli import main
    shape = (1, 19, 23, 3)
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model(shape, MOBILENET, seed=3))
    with pytest.raises(EerieError, match="--input-rows needs a patch stage"):
        compile_model(p, name="m", patch="off", input_mode="rows")
    rc = main([str(p), "-o", str(tmp_path / "o"), "--patch", "off", "--input-rows"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "--input-rows needs a patch stage" in err[0]
    with pytest.raises(EerieError, match="no patch stage was chosen"):
        compile_model(p, name="m", patch="auto", max_recompute=0, input_mode="rows")
