#!/usr/bin/env bash
# Compile the bundled example model (tiny_conv.tflite: int8 CONV_2D + FULLY_CONNECTED +
# SOFTMAX, made by make_example_model.py) for a Cortex-M board, run it in QEMU on five random
# inputs, and print the outputs and the measurements (instructions per inference, flash,
# static RAM, stack high-water mark).
#
#     bash examples/run_on_board.sh [BOARD]        (default mps2-an386, a Cortex-M4F)
#
# Needs eerie-c (pip install .), arm-none-eabi-gcc with newlib, make and qemu-system-arm;
# .ci/setup installs them. The firmware project is kept in build/tiny_conv-BOARD/ (override
# with OUT=dir): `make -C build/tiny_conv-BOARD run` runs it again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
board="${1:-mps2-an386}"
out="${OUT:-build/tiny_conv-$board}"
if command -v eerie-c >/dev/null; then
    eerie=(eerie-c)
else
    eerie=(env "PYTHONPATH=$here/..${PYTHONPATH:+:$PYTHONPATH}" python3 -m eerie_c.cli)
fi

mkdir -p "$out"
python3 - "$out/x.npy" <<'PY'
import sys
import numpy as np
# Five 10x10 one-channel "images" in the model's int8 input format (scale 1/128, zero point 0).
np.save(sys.argv[1], np.random.default_rng(0).integers(-128, 128, (5, 1, 10, 10, 1), dtype=np.int8))
PY

echo "== eerie-c run tiny_conv.tflite --board $board (5 inferences in one QEMU boot)"
"${eerie[@]}" run "$here/tiny_conv.tflite" --board "$board" \
    --input "$out/x.npy" --output "$out/y.npy" -o "$out"
echo "== outputs saved to $out/y.npy; firmware project, ELF and report.json in $out/"
