"""The output length of a sliding window (TFLite's SAME / VALID padding rule): shared by the
frontend, which derives shapes the ops determine, and the kernels."""


def out_size(padding: str, size: int, k: int, stride: int, dilation: int) -> int:
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    if padding == "VALID":
        return (size + stride - eff) // stride
    raise ValueError(padding)
