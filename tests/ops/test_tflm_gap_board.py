"""The operators added to close the gap with TFLM's registrations (issue 16), all in one model,
built once as firmware for mps2-an386 (Cortex-M4F) and run in QEMU for two consecutive
inferences (state carries over): every output matches the tflite-micro runtime (ints
bit-exact, floats to rounding; newlib's sinf / cosf on the board). Builtins: SIN, COS,
FLOOR_DIV, FLOOR_MOD, L2_POOL_2D, QUANTIZE int32, SHAPE, BROADCAST_ARGS, REVERSE_V2, ADD_N,
EMBEDDING_LOOKUP, REDUCE_ALL, DYNAMIC_UPDATE_SLICE; custom: TFLite_Detection_PostProcess,
CIRCULAR_BUFFER and the Signal ops.
Fails, never skips, without the cross toolchain and QEMU (like tests/boards)."""
import numpy as np

from conftest import assert_float_close, eerie_run, random_inputs, tflm_run
from tflite_builder import PAD, ModelBuilder

Q8 = dict(scale=0.05, zero_point=-6)


def gap_model():
    """(model, feeds for 2 inferences, label per output)."""
    mb = ModelBuilder()
    rng = np.random.default_rng(7)
    feeds, labels = [], []

    def inp(shape, dtype, values, **q):
        feeds.append(values)
        return mb.input(shape, dtype, **q)

    def out(t, label):
        mb.output(t)
        labels.append(label)

    f = inp([2, 3, 5], "float32", rng.uniform(-6, 6, (2, 2, 3, 5)).astype(np.float32))
    d = inp([5], "float32", (rng.uniform(0.5, 3, (2, 5)) * rng.choice([-1, 1], (2, 5))).astype(np.float32))
    for kind, ins in (("SIN", [f]), ("COS", [f]), ("FLOOR_DIV", [f, d]), ("FLOOR_MOD", [f, d])):
        y = mb.tensor([2, 3, 5], "float32")
        mb.op(kind, ins, [y])
        out(y, kind)
    img = inp([2, 5, 6, 3], "float32", random_inputs([2, 5, 6, 3], "float32", 2, seed=1))
    y = mb.tensor([2, 3, 3, 3], "float32")
    mb.op("L2_POOL_2D", [img], [y], "Pool2DOptions", padding=PAD["SAME"], strideH=2, strideW=2,
          filterHeight=3, filterWidth=2)
    out(y, "L2_POOL_2D")
    acc = inp([40], "int32", rng.integers(-200000, 200000, (2, 40)).astype(np.int32),
              scale=0.0004, zero_point=0)
    for dt, q in (("int8", Q8), ("int16", dict(scale=0.002, zero_point=0))):
        y = mb.tensor([40], dt, **q)
        mb.op("QUANTIZE", [acc], [y])
        out(y, f"QUANTIZE int32->{dt}")
    y = mb.tensor([3], "int32")
    mb.op("SHAPE", [f], [y], "ShapeOptions", outType=2)
    out(y, "SHAPE")
    s1 = inp([4], "int32", np.array([[2, 1, 5, 1], [1, 3, 1, 1]], np.int32))
    s2 = inp([2], "int32", np.array([[1, 7], [6, 1]], np.int32))
    y = mb.tensor([4], "int32")
    mb.op("BROADCAST_ARGS", [s1, s2], [y])
    out(y, "BROADCAST_ARGS")
    x8 = inp([3, 4, 2], "int8", random_inputs([3, 4, 2], "int8", 2, seed=2), **Q8)
    y = mb.tensor([3, 4, 2], "int8", **Q8)
    mb.op("REVERSE_V2", [x8, mb.const(np.array([1, 2], np.int32), "int32")], [y], "ReverseV2Options")
    out(y, "REVERSE_V2")
    y8 = inp([3, 4, 2], "int8", random_inputs([3, 4, 2], "int8", 2, seed=3), **Q8)
    y = mb.tensor([3, 4, 2], "int8", **dict(scale=0.11, zero_point=4))
    mb.op("ADD_N", [x8, y8, x8], [y], "AddNOptions")
    out(y, "ADD_N int8")
    y = mb.tensor([2, 3, 5], "float32")
    mb.op("ADD_N", [f, f, f], [y], "AddNOptions")
    out(y, "ADD_N float32")
    ids = inp([4], "int32", np.array([[0, 5, 2, 5], [1, 1, 4, 3]], np.int32))
    table = mb.const(rng.integers(-128, 128, (6, 3)).astype(np.int8), "int8", scale=0.02, zero_point=0)
    for dt, q in (("int8", dict(scale=0.02, zero_point=0)), ("float32", {})):
        y = mb.tensor([4, 3], dt, **q)
        mb.op("EMBEDDING_LOOKUP", [ids, table], [y])
        out(y, f"EMBEDDING_LOOKUP int8->{dt}")
    b = inp([3, 4], "bool", rng.random((2, 3, 4)) > 0.2)
    y = mb.tensor([3], "bool")
    mb.op("REDUCE_ALL", [b, mb.const(np.array([1], np.int32), "int32")], [y], "ReducerOptions")
    out(y, "REDUCE_ALL")
    upd = inp([2, 2], "int8", random_inputs([2, 2], "int8", 2, seed=4), **Q8)
    start = inp([2], "int32", np.array([[1, 3], [-2, 1]], np.int32))
    base = inp([3, 4], "int8", random_inputs([3, 4], "int8", 2, seed=5), **Q8)
    y = mb.tensor([3, 4], "int8", **Q8)
    mb.op("DYNAMIC_UPDATE_SLICE", [base, upd, start], [y])
    out(y, "DYNAMIC_UPDATE_SLICE")
    # regular NMS writes every output slot (fast NMS leaves some as the arena held them)
    enc = inp([1, 12, 4], "float32", (rng.standard_normal((2, 1, 12, 4)) * 0.5).astype(np.float32))
    sc = inp([1, 12, 3], "float32", rng.random((2, 1, 12, 3)).astype(np.float32))
    grid = np.stack(np.meshgrid(np.linspace(0.2, 0.8, 3), np.linspace(0.2, 0.8, 4), indexing="ij"), -1)
    anchors = np.concatenate([grid.reshape(12, 2), np.full((12, 2), 0.3)], 1).astype(np.float32)
    dets = [mb.tensor(s, "float32") for s in ([1, 5, 4], [1, 5], [1, 5], [1])]
    mb.custom_op("TFLite_Detection_PostProcess", [enc, sc, mb.const(anchors, "float32")], dets,
                 dict(max_detections=5, max_classes_per_detection=1, detections_per_class=3,
                      use_regular_nms=True, nms_score_threshold=0.2, nms_iou_threshold=0.5,
                      num_classes=2, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0))
    for t, label in zip(dets, ("boxes", "classes", "scores", "count")):
        out(t, f"TFLite_Detection_PostProcess {label}")
    # the buffer (a variable tensor) carries over from the first inference to the second
    frame = inp([1, 1, 1, 3], "int8", random_inputs([1, 1, 1, 3], "int8", 2, seed=6), **Q8)
    buf = mb.tensor([1, 4, 1, 3], "int8", variable=True, **Q8)
    mb.custom_op("CIRCULAR_BUFFER", [frame], [buf], {"cycles_max": 1})
    y = mb.tensor([1, 4, 1, 3], "int8", **Q8)
    mb.op("QUANTIZE", [buf], [y])
    out(y, "CIRCULAR_BUFFER")
    # the Signal library's stateless ops
    pcm = inp([16], "int16", rng.integers(-32768, 32768, (2, 16)).astype(np.int16))
    win = mb.const(rng.integers(-32768, 32768, 8).astype(np.int16), "int16")
    y = mb.tensor([16], "int16")
    mb.custom_op("SignalWindow", [pcm, win], [y], {"shift": 12})
    out(y, "SignalWindow")
    y = mb.tensor([8], "uint32")
    mb.custom_op("SignalEnergy", [pcm], [y], {"start_index": 0, "end_index": 8})
    out(y, "SignalEnergy")
    y, bits = mb.tensor([16], "int16"), mb.tensor([], "int32")
    mb.custom_op("SignalFftAutoScale", [pcm], [y, bits])
    out(y, "SignalFftAutoScale")
    out(bits, "SignalFftAutoScale bits")
    e64 = inp([6], "uint64", rng.integers(0, 2 ** 62, (2, 6), dtype=np.uint64))
    y = mb.tensor([6], "uint32")
    mb.custom_op("SignalFilterBankSquareRoot", [e64, mb.const(np.array(2, np.int32), "int32")], [y])
    out(y, "SignalFilterBankSquareRoot")
    spec = inp([12], "uint32", rng.integers(0, 2 ** 20, (2, 12)).astype(np.uint32))
    bank = [np.array(a, np.int16) for a in ([4096, 2048, 1024, 3000, 100, 4000, 5, 6],
                                             [0, 2048, 3072, 1096, 3996, 96, 7, 8],
                                             [1, 3, 5, 8], [0, 2, 4, 6], [2, 2, 2, 2])]
    fb = mb.tensor([3], "uint64")
    mb.custom_op("SignalFilterBank", [spec] + [mb.const(a, "int16") for a in bank], [fb],
                 {"num_channels": 3})
    out(fb, "SignalFilterBank")
    y = mb.tensor([12], "int16")
    mb.custom_op("SignalFilterBankLog", [spec], [y], {"input_correction_bits": 3, "output_scale": 1600})
    out(y, "SignalFilterBankLog")
    y, est = mb.tensor([12], "uint32"), mb.tensor([12], "uint32")
    mb.custom_op("SignalFilterBankSpectralSubtraction", [spec], [y, est],
                 dict(alternate_one_minus_smoothing=15000, alternate_smoothing=1384, clamping=True,
                      min_signal_remaining=655, num_channels=12, one_minus_smoothing=15565,
                      smoothing=819, smoothing_bits=10, spectral_subtraction_bits=14))
    out(y, "SignalFilterBankSpectralSubtraction")
    out(est, "SignalFilterBankSpectralSubtraction noise")
    y = mb.tensor([12], "uint32")
    mb.custom_op("SignalPCAN", [spec, spec, mb.const(rng.integers(-32768, 32768, 125).astype(np.int16),
                                                      "int16")], [y], {"snr_shift": 6})
    out(y, "SignalPCAN")
    y = mb.tensor([16], "int16")
    mb.custom_op("SignalDelay", [pcm], [y], {"delay_length": 5})
    out(y, "SignalDelay")
    y, ok = mb.tensor([4, 6], "int16"), mb.tensor([], "bool")
    mb.custom_op("SignalFramer", [pcm], [y, ok], {"frame_size": 6, "frame_step": 4, "prefill": True})
    out(y, "SignalFramer")
    out(ok, "SignalFramer valid")
    y, ok = mb.tensor([32], "int16"), mb.tensor([], "bool")
    mb.custom_op("SignalStacker", [pcm], [y, ok], {"num_channels": 16, "stacker_left_context": 1,
                                                   "stacker_right_context": 0, "stacker_step": 1})
    out(y, "SignalStacker")
    out(ok, "SignalStacker valid")
    frames = inp([3, 8], "int16", rng.integers(-32768, 32768, (2, 3, 8)).astype(np.int16))
    y = mb.tensor([12], "int16")
    mb.custom_op("SignalOverlapAdd", [frames], [y], {"T": 7, "frame_step": 4})
    out(y, "SignalOverlapAdd")
    return mb.build(), feeds, labels


def test_gap_ops_on_board(tmp_path, board_tools):
    model, feeds, labels = gap_model()
    ref = tflm_run(model, feeds)
    got, report = eerie_run(model, feeds, tmp_path, board="mps2-an386")
    assert report["board"] == "mps2-an386"
    for g, r, label in zip(got, ref, labels):
        assert g.shape == r.shape and g.dtype == r.dtype, label
        if np.issubdtype(r.dtype, np.floating):
            assert_float_close(g, r, what=label)
        else:
            np.testing.assert_array_equal(g, r, err_msg=label)
