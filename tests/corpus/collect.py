#!/usr/bin/env python3
"""Where every corpus model comes from, as data, and the script that copies them out of git
clones of their repositories (CI has no network: the copies are committed; this script is how
they were made, and checks that they are still byte-identical to the upstream blobs).

    python3 tests/corpus/collect.py --git tensorflow/tflite-micro=PATH [--git ...] [--write]

PATH is a clone (or bare mirror) that has the commit below. Without --write the committed
files are compared with upstream; with it they are (re)written. Repositories not given are
skipped (and said so). tests/models/test_corpus.py checks that every committed file is listed
here; SOURCES.md says what each one is.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

COMMITS = {
    "tensorflow/tflite-micro": "90b983c2b3f1480642e040bbd2ddb37b998f3424",
    "mlcommons/tiny": "1afd2c9820f795965a6134facd0b4dfae41ef23f",
    "tensorflow/tflite-support": "dd3362ea685bb7ab1f7268c81ec567d3b720ae57",
    "xmos/lib_tflite_micro": "20a0abe2aa73c614cb184aa026cd4325bd8a45bc",
    "zhenhuaw-me/tflite2onnx": "32d4d5731be506d5797c648fa73a91b36a80222b",
    "tensorflow/tflite-micro-arduino-examples": "7948b85e020470a30a83bf00e10fc43b486bfcba",
}

_MICRO = "tensorflow/lite/micro/"
_SEANET = ["add0", "add16", "conv0", "conv2", "conv15", "conv21", "leaky_relu0", "leaky_relu12",
           "pad0", "pad11", "quantize0", "quantize1", "strided_slice0", "strided_slice15",
           "strided_slice27", "sub0", "sub4", "transpose_conv3", "transpose_conv4"]
_TFLITE2ONNX = ["add-broadcast2", "avgpool-concat", "conv-dilation", "conv-reshape-multiple-conv",
                "depthwise-conv-stride", "mean-keepdims", "padding", "prelu", "resize-bilinear",
                "resize-nearest-neighbor", "split", "stridedslice-beginmask", "stridedslice-endmask",
                "transpose", "transposeconv-samepad-stride2", "transposeconv-validpad",
                "conv-quant-fp16", "relu6-power"]
_SUPPORT = "tensorflow_lite_support/cc/test/testdata/task/"

# (file here, repository, path there)
FILES = [
    ("tflite-micro/hello_world_float.tflite", "tensorflow/tflite-micro", _MICRO + "examples/hello_world/models/hello_world_float.tflite"),
    ("tflite-micro/hello_world_int8.tflite", "tensorflow/tflite-micro", _MICRO + "examples/hello_world/models/hello_world_int8.tflite"),
    ("tflite-micro/simple_add_model.tflite", "tensorflow/tflite-micro", _MICRO + "examples/memory_footprint/models/simple_add_model.tflite"),
    ("tflite-micro/audio_preprocessor_float.tflite", "tensorflow/tflite-micro", _MICRO + "examples/micro_speech/models/audio_preprocessor_float.tflite"),
    ("tflite-micro/trained_lstm.tflite", "tensorflow/tflite-micro", _MICRO + "examples/mnist_lstm/trained_lstm.tflite"),
    ("tflite-micro/trained_lstm_int8.tflite", "tensorflow/tflite-micro", _MICRO + "examples/mnist_lstm/trained_lstm_int8.tflite"),
    ("tflite-micro/keyword_scrambled.tflite", "tensorflow/tflite-micro", _MICRO + "models/keyword_scrambled.tflite"),
    ("tflite-micro/keyword_scrambled_8bit.tflite", "tensorflow/tflite-micro", _MICRO + "models/keyword_scrambled_8bit.tflite"),
    ("tflite-micro/person_detect.tflite", "tensorflow/tflite-micro", _MICRO + "models/person_detect.tflite"),
    ("tflite-micro/person_detect_vela.tflite", "tensorflow/tflite-micro", _MICRO + "models/person_detect_vela.tflite"),
    ("tflite-micro/micro_speech_lstm.tflite", "tensorflow/tflite-micro", "third_party/xtensa/examples/micro_speech_lstm/micro_speech_lstm.tflite"),
    ("tflite-micro/dtln_noise_suppression.tflite", "tensorflow/tflite-micro", _MICRO + "examples/dtln/dtln_noise_suppression.tflite"),
    *[(f"tflite-micro/seanet/{n}.tflite", "tensorflow/tflite-micro",
       f"{_MICRO}integration_tests/seanet/{n.rstrip('0123456789')}/{n}.tflite") for n in _SEANET],
    ("mlcommons-tiny/str_ww_ref_model.tflite", "mlcommons/tiny", "benchmark/training/streaming_wakeword/trained_models/str_ww_ref_model.tflite"),
    ("mlcommons-tiny/kws_ref_model_float32.tflite", "mlcommons/tiny", "benchmark/training/keyword_spotting/trained_models/kws_ref_model_float32.tflite"),
    ("tflite-support/mobilenet_v1_0.25_224_quant.tflite", "tensorflow/tflite-support", _SUPPORT + "vision/mobilenet_v1_0.25_224_quant.tflite"),
    ("tflite-support/dilated_conv.tflite", "tensorflow/tflite-support", _SUPPORT + "vision/dilated_conv.tflite"),
    ("tflite-support/test_model_nl_classifier.tflite", "tensorflow/tflite-support", _SUPPORT + "text/test_model_nl_classifier.tflite"),
    ("tflite_micro_compiler/lstm2.tflite", "xmos/lib_tflite_micro", "tflite_micro_compiler/examples/lstm2.tflite"),
    ("tflite_micro_compiler/custom.tflite", "xmos/lib_tflite_micro", "tflite_micro_compiler/examples/custom/custom.tflite"),
    *[(f"tflite2onnx/{n}.float32.tflite", "zhenhuaw-me/tflite2onnx", f"assets/tests/{n}.float32.tflite")
      for n in _TFLITE2ONNX],
    # a C array in the repository (`const unsigned char g_..._model_data[] = {0x20, ...};`)
    ("tflite-micro-arduino-examples/magic_wand.tflite", "tensorflow/tflite-micro-arduino-examples",
     "examples/magic_wand/magic_wand_model_data.cpp"),
    ("tflite2onnx/conv-relu.uint8.tflite", "zhenhuaw-me/tflite2onnx", "assets/tests/conv-relu.uint8.tflite"),
    ("tflite2onnx/mirror-pad.int32.tflite", "zhenhuaw-me/tflite2onnx", "assets/tests/mirror-pad.int32.tflite"),
]


def upstream(git_dir: str, repo: str, path: str) -> bytes:
    # (git -C works in a work tree and in a bare mirror alike)
    data = subprocess.run(["git", "-C", git_dir, "show", f"{COMMITS[repo]}:{path}"],
                          check=True, capture_output=True).stdout
    if path.endswith((".cc", ".cpp")):   # the model as a C array: its bytes, in order
        text = data.decode()
        start = text.index("{", text.index("[]"))
        data = bytes(int(h, 16) for h in re.findall(r"0x([0-9a-fA-F]{2})", text[start:text.index("};", start)]))
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git", action="append", default=[], metavar="OWNER/NAME=PATH",
                    help="a clone or mirror of a source repository")
    ap.add_argument("--write", action="store_true", help="write the files instead of comparing")
    args = ap.parse_args(argv)
    dirs = dict(g.split("=", 1) for g in args.git)
    bad = 0
    for repo in sorted({r for _, r, _ in FILES} - set(dirs)):
        print(f"skipped {repo} (no --git {repo}=PATH)")
    for here, repo, path in FILES:
        if repo not in dirs:
            continue
        data = upstream(dirs[repo], repo, path)
        if data[4:8] != b"TFL3":   # a Git LFS pointer, not a model
            print(f"NOT A MODEL {repo}:{path}")
            bad += 1
        elif args.write:
            (HERE / here).parent.mkdir(parents=True, exist_ok=True)
            (HERE / here).write_bytes(data)
        elif not (HERE / here).is_file() or (HERE / here).read_bytes() != data:
            print(f"DIFFERS {here} from {repo}:{path}")
            bad += 1
    print("failed" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
