"""NAME.h's I/O macros for every shared model against the .tflite itself, read here with the
tflite package (not through eerie-c's frontend): each input's and output's _TYPE, _RANK,
_SHAPE, _ELEMENTS, _BYTES and, for quantized tensors, _SCALE and _ZERO_POINT (float tensors
must have none). An application sizes its buffers and dequantizes with these."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tflite

from conftest import MODELS
from eerie_c.api import compile_model

SHARED = sorted(p.stem for p in MODELS.glob("*.tflite"))
# tflite.TensorType value -> (C type, bytes per element)
C_TYPES = {tflite.TensorType.FLOAT32: ("float", 4), tflite.TensorType.INT8: ("int8_t", 1),
           tflite.TensorType.UINT8: ("uint8_t", 1), tflite.TensorType.INT16: ("int16_t", 2),
           tflite.TensorType.INT32: ("int32_t", 4)}


def header_macros(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"^#define (\w+)[ \t]+(.+?)\s*$", text, re.M):
        assert m.group(1) not in out, f"{m.group(1)} defined twice"
        out[m.group(1)] = m.group(2)
    return out


def tflite_io(path):
    """[(kind, index, C type, shape, bytes, scale or None, zero point or None)] from the file."""
    model = tflite.Model.GetRootAs(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    rows = []
    for kind, ids in (("INPUT", sg.InputsAsNumpy()), ("OUTPUT", sg.OutputsAsNumpy())):
        for k, tid in enumerate(ids):
            t = sg.Tensors(int(tid))
            ctype, size = C_TYPES[t.Type()]
            shape = [int(d) for d in t.ShapeAsNumpy()]
            q = t.Quantization()
            scales = q.ScaleAsNumpy() if q is not None and not q.ScaleIsNone() else None
            if scales is not None and len(scales):
                assert len(scales) == 1, "per-tensor quantization expected on model I/O"
                scale, zp = float(scales[0]), int(q.ZeroPointAsNumpy()[0])
            else:
                scale = zp = None
            rows.append((kind, k, ctype, shape, int(np.prod(shape)) * size, scale, zp))
    return rows


def test_shared_models_present(models_dir):
    assert len(SHARED) >= 6, SHARED


@pytest.mark.parametrize("model", SHARED)
def test_io_macros_match_the_tflite_file(models_dir, tmp_path, model):
    path = models_dir / f"{model}.tflite"
    compile_model(path, tmp_path, name="net")
    mac = header_macros((tmp_path / "net.h").read_text())
    rows = tflite_io(path)
    n_in = sum(r[0] == "INPUT" for r in rows)
    assert mac["NET_NUM_INPUTS"] == str(n_in) and mac["NET_NUM_OUTPUTS"] == str(len(rows) - n_in)
    for kind, k, ctype, shape, nbytes, scale, zp in rows:
        p = f"NET_{kind}{k}_"
        assert mac[p + "TYPE"] == ctype
        assert mac[p + "RANK"] == str(len(shape))
        assert [int(v) for v in re.fullmatch(r"\{ (.*) \}", mac[p + "SHAPE"]).group(1).split(", ")] == shape
        assert mac[p + "ELEMENTS"] == str(int(np.prod(shape)))
        assert mac[p + "BYTES"] == str(nbytes)
        if scale is None:
            assert p + "SCALE" not in mac and p + "ZERO_POINT" not in mac
        else:
            # The header spells the scale as a float literal; as a float32 it is the file's.
            lit = mac[p + "SCALE"]
            assert lit.endswith("f"), lit
            assert np.float32(float(lit[:-1])) == np.float32(scale), (lit, scale)
            assert int(mac[p + "ZERO_POINT"]) == zp
