"""TFLite_Detection_PostProcess (the custom op closing SSD detectors): float32 box encodings
[1, B, >=4], class scores [1, B, C(+1 background)] and anchors [B, 4] (y, x, h, w) in; boxes
[1, N, 4], classes [1, N], scores [1, N] and the number of detections [1] out. Its options are
the op's flexbuffer map (frontend/tflite.py).

As TFLM's reference kernel (bit for bit on the same float arithmetic):
- decoding in double: centre = e / scale * anchor size + anchor centre, half size =
  0.5 * exp(e / scale) * anchor size, then corners in float;
- single-class NMS: the boxes scoring >= the score threshold, stably sorted by decreasing score
  (TFLM's merge sort is stable; an insertion sort here), then greedy suppression of boxes whose
  IoU with a kept one is > the IoU threshold;
- fast NMS (default): per box its best class (ties: the lower class, TFLM's partial sort
  order), one NMS on the best scores, up to max_detections boxes. With
  max_classes_per_detection K > 1, TFLM puts the k-th class of the n-th detection in slot
  K * n + k, leaving gaps and writing past its output tensors (it corrupts the other
  outputs): refused here. The template keeps the general slot rule, bounded by the outputs;
- regular NMS (use_regular_nms): per class an NMS of up to detections_per_class boxes, merged
  with the best so far and stably sorted, keeping max_detections.
Output slots TFLM leaves unwritten are 0 here (TFLM leaves what the arena held). TFLM fails
the invoke when a decoded box is empty or inverted (ymin >= ymax or xmin >= xmax); there is
no error path here, such a box has area <= 0 and IoU 0 with every box.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..templating import c_float
from ..errors import EerieError
from . import Lowered, kernel


def _opt(op, key, default=None):
    v = op.attrs.get(key, default)
    if v is None:
        raise EerieError(f"TFLite_Detection_PostProcess (op {op.index}): option {key!r} missing")
    return v


def _double(v) -> str:
    """A float32 option as TFLM reads it (AsFloat), widened to a C double literal."""
    return repr(float(np.float32(v)))


@kernel("CUSTOM:TFLite_Detection_PostProcess", dtypes=("float32",))
def lower_detection_postprocess(op, g, ctx):
    what = f"TFLite_Detection_PostProcess (op {op.index})"
    if len(op.inputs) != 3 or len(op.outputs) != 4:
        raise EerieError(f"{what}: expected 3 inputs and 4 outputs")
    enc, scores, anchors = (g.t(t) for t in op.inputs)
    outs = [g.t(t) for t in op.outputs]
    if enc.dtype != "float32" or scores.dtype != "float32" or anchors.dtype != "float32" \
            or any(o.dtype != "float32" for o in outs):
        raise EerieError(f"{what}: TFLM runs float32 tensors only")
    if len(enc.shape) != 3 or enc.shape[0] != 1 or enc.shape[2] < 4 or len(scores.shape) != 3 \
            or scores.shape[0] != 1 or scores.shape[1] != enc.shape[1] \
            or list(anchors.shape) != [enc.shape[1], 4]:
        raise EerieError(f"{what}: shapes {list(enc.shape)}, {list(scores.shape)}, "
                         f"{list(anchors.shape)}; expected [1, B, >=4], [1, B, C], [B, 4]")
    b, stride, cb = int(enc.shape[1]), int(enc.shape[2]), int(scores.shape[2])
    c = int(_opt(op, "num_classes"))
    m = int(_opt(op, "max_detections"))
    k_max = int(_opt(op, "max_classes_per_detection"))
    d = int(op.attrs.get("detections_per_class", 100))
    regular = bool(op.attrs.get("use_regular_nms", False))
    score_thr = float(np.float32(_opt(op, "nms_score_threshold")))
    iou_thr = float(np.float32(_opt(op, "nms_iou_threshold")))
    if not 0 <= cb - c <= 1 or c < 1 or m < 0:
        raise EerieError(f"{what}: {c} classes for score rows of {cb} (TFLM allows one "
                         "background class at most)")
    if not 0.0 < iou_thr <= 1.0:
        raise EerieError(f"{what}: IoU threshold {iou_thr} outside (0, 1] (TFLM refuses it)")
    if (regular and d <= 0) or (not regular and k_max <= 0):
        raise EerieError(f"{what}: detections_per_class / max_classes_per_detection must be > 0")
    k = min(k_max, c)
    if not regular and k > 1:
        raise EerieError(f"{what}: fast NMS with max_classes_per_detection {k_max} > 1 is not "
                         "supported: TFLM puts the k-th class of the n-th detection in slot "
                         "K * n + k and so writes past its output tensors")
    n_slots = int(outs[1].size)
    if list(outs[0].shape)[-1:] != [4] or outs[0].size != 4 * n_slots or outs[2].size != n_slots \
            or outs[3].size != 1:
        raise EerieError(f"{what}: outputs {[list(o.shape) for o in outs]} do not match")

    # scratch: decoded boxes, then per-box arrays, then the mode's own
    off, size = {}, 16 * b
    for name, nbytes in (("cand", 4 * b), ("keep", 4 * b), ("keep_score", 4 * b),
                         ("order", 4 * b), ("selected", 4 * b)):
        off[name], size = size, size + nbytes
    if regular:
        off["merged"], size = size, size + 4 * (m + d)
        off["merged_score"], size = size, size + 4 * (m + d)
    else:
        off["top"], size = size, size + 4 * b * k
    off["active"], size = size, size + b

    inputs = [enc.id, scores.id]
    if anchors.is_const:
        anchor_name = ctx.tensor_const(anchors, "anchors")
    else:
        inputs.append(anchors.id)
        anchor_name = "in2"
    for key in ("y_scale", "x_scale", "h_scale", "w_scale"):
        if float(np.float32(_opt(op, key))) == 0.0:
            raise EerieError(f"{what}: {key} is 0")
    body = render("kernels/detection_postprocess.c.j2", B=b, stride=stride, C=c, CB=cb, L=cb - c,
                  M=m, K=k, D=d, regular=regular, score_thr=c_float(score_thr),
                  iou_thr=c_float(iou_thr), ys=_double(op.attrs["y_scale"]),
                  xs=_double(op.attrs["x_scale"]), hs=_double(op.attrs["h_scale"]),
                  ws=_double(op.attrs["w_scale"]), anchors=anchor_name, n_out_slots=n_slots,
                  off=off)
    return Lowered(body=body, inputs=inputs, outputs=[o.id for o in outs], scratch_bytes=size,
                   comment=f"TFLite_Detection_PostProcess {b} boxes, {c} classes, "
                           f"{'regular' if regular else 'fast'} NMS")
