"""Differential testing of whole compiled programs (docs/testing.md): random valid programs from
each frontend's generator, compiled by eerie-c, run on the host (and a share on QEMU boards),
and compared with the reference (TFLM for .tflite, torch for PyTorch programs)."""
