"""TFLite_Detection_PostProcess (custom op, float32) vs TFLM: fast NMS and regular NMS, with and without a background class, constant and activation
anchors, overlapping boxes so that suppression happens, and score ties. Only the slots TFLM
writes are compared (it leaves the others as the arena held them; eerie-c writes 0)."""
import numpy as np
import pytest

from conftest import assert_float_close, eerie_run, tflm_run
from tflite_builder import ModelBuilder


def dpp_model(b, c, background, options, const_anchors, anchors, n_slots):
    mb = ModelBuilder()
    cb = c + background
    enc = mb.input([1, b, 4], "float32")
    sc = mb.input([1, b, cb], "float32")
    an = mb.const(anchors, "float32") if const_anchors else mb.input([b, 4], "float32")
    outs = [mb.tensor([1, n_slots, 4], "float32"), mb.tensor([1, n_slots], "float32"),
            mb.tensor([1, n_slots], "float32"), mb.tensor([1], "float32")]
    mb.custom_op("TFLite_Detection_PostProcess", [enc, sc, an], outs,
                 dict(options, num_classes=c, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0))
    for o in outs:
        mb.output(o)
    return mb.build()


def data(b, cb, seed, n=2):
    rng = np.random.default_rng(seed)
    # anchors on a coarse grid: neighbours overlap, so NMS suppresses some
    ys, xs = np.meshgrid(np.linspace(0.1, 0.9, 6), np.linspace(0.1, 0.9, (b + 5) // 6), indexing="ij")
    anchors = np.stack([ys.ravel()[:b], xs.ravel()[:b], np.full(b, 0.3), np.full(b, 0.25)], 1)
    anchors = anchors.astype(np.float32)
    enc = (rng.standard_normal((n, 1, b, 4)) * 0.5).astype(np.float32)
    scores = rng.random((n, 1, b, cb)).astype(np.float32)
    scores[0, 0, :4, -1] = 0.75          # ties
    return anchors, enc, scores


CASES = [  # boxes, classes, background, options, slots
    (30, 3, 1, dict(max_detections=10, max_classes_per_detection=1, nms_score_threshold=0.3,
                    nms_iou_threshold=0.5), 10),
    (24, 4, 0, dict(max_detections=5, max_classes_per_detection=1, nms_score_threshold=0.0,
                    nms_iou_threshold=0.3), 5),
    (20, 1, 1, dict(max_detections=6, max_classes_per_detection=3, nms_score_threshold=0.2,
                    nms_iou_threshold=0.6), 6),      # K = min(3, one class) = 1
    (30, 3, 1, dict(max_detections=10, max_classes_per_detection=1, nms_score_threshold=0.25,
                    nms_iou_threshold=0.5, use_regular_nms=True, detections_per_class=4), 10),
    (18, 2, 0, dict(max_detections=8, max_classes_per_detection=1, nms_score_threshold=0.1,
                    nms_iou_threshold=0.4, use_regular_nms=True, detections_per_class=6), 8),
]


def compare(got, ref):
    for k in range(ref[3].shape[0]):                 # inferences
        n = int(ref[3][k, 0])
        assert got[3][k, 0] == n
        assert_float_close(got[0][k, 0, :n], ref[0][k, 0, :n], what="boxes")
        np.testing.assert_array_equal(got[1][k, 0, :n], ref[1][k, 0, :n], err_msg="classes")
        np.testing.assert_array_equal(got[2][k, 0, :n], ref[2][k, 0, :n], err_msg="scores")


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("const_anchors", [True, False])
def test_detection_postprocess(tmp_path, case, const_anchors):
    b, c, bg, options, slots = CASES[case]
    anchors, enc, scores = data(b, c + bg, case)
    model = dpp_model(b, c, bg, options, const_anchors, anchors, slots)
    feeds = [enc, scores] + ([] if const_anchors else [np.stack([anchors] * 2)])
    ref = tflm_run(model, feeds)
    got, _ = eerie_run(model, feeds, tmp_path)
    assert ref[3].min() > 0                           # something is detected
    compare(got, ref)


def test_several_classes_per_detection_refused(tmp_path):
    """TFLM's fast NMS writes past its outputs when max_classes_per_detection > 1."""
    from eerie_c.api import compile_model
    from eerie_c.errors import EerieError
    anchors, _, _ = data(20, 4, 0)
    p = tmp_path / "k2.tflite"
    p.write_bytes(dpp_model(20, 3, 1, dict(max_detections=6, max_classes_per_detection=2,
                                           nms_score_threshold=0.2, nms_iou_threshold=0.6),
                            True, anchors, 12))
    with pytest.raises(EerieError, match="writes past its output"):
        compile_model(p)
