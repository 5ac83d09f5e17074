#!/usr/bin/env bash
# The README's main job: set up a fresh Debian machine (as root: Python package, cross
# toolchain, QEMU; see .ci/setup), then compile the bundled example model for the
# mps2-an386 board (Cortex-M4F) and run it in QEMU, printing outputs and measurements.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup
bash examples/run_on_board.sh mps2-an386
