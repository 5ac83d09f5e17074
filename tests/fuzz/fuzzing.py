"""What the fuzz tests share: example counts and seeds (FUZZ_SCALE, FUZZ_SEED), the per-example
time limit, the mutations of a .tflite file (structured field corruption located with the
`tflite` readers, byte-level mutations) and a small model that compiles in milliseconds."""
from __future__ import annotations

import os
import signal
import struct
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import tflite
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import ACT, ModelBuilder  # noqa: E402

SCALE = float(os.environ.get("FUZZ_SCALE", "1.0"))
SEED = os.environ.get("FUZZ_SEED")
HANG_SECONDS = int(os.environ.get("FUZZ_HANG_SECONDS", "20"))
# A full compile (kernels, plan, emit, and the C proofs, which run gcc) of the largest shared
# model (vww) takes ~7 s on an idle 2-core machine and several times that on a loaded one.
# The guard is there to turn a hang into a failure, not to time compiles (timing is bench/'s
# job), so full compiles get a limit no clean compile comes near.
COMPILE_HANG_SECONDS = int(os.environ.get("FUZZ_COMPILE_HANG_SECONDS", "90"))
ALL_MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8",
              "pretrainedResnet", "ad01_fp32"]


def n(base: int) -> int:
    return max(1, int(base * SCALE))


def fuzz_settings(examples: int, fuzz_seed: str | None = SEED):
    """settings for a property, plus its seed: derandomized (the same examples every run)
    without a seed, hypothesis's @seed otherwise. (derandomize=True with a seed ignores the
    seed: every --seed drew the same examples.)"""
    kw = dict(max_examples=n(examples), deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=True,
              derandomize=fuzz_seed is None)

    def apply(test):
        test = settings(**kw)(test)
        return test if fuzz_seed is None else seed(int(fuzz_seed))(test)
    return apply


class Hang(Exception):
    pass


@contextmanager
def hang_guard(seconds: int = HANG_SECONDS):
    """Fail (not hang) when one example takes longer than `seconds`."""
    def on_alarm(signum, frame):
        raise Hang(f"one example took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------------------------------
# Where the interesting fields of a real model are.

def locate_fields(buf: bytes) -> list[tuple[str, int]]:
    """(width, byte position) of every field the frontend reads: i32 / u32 / u8 / f32 / i64."""
    out: list[tuple[str, int]] = []
    m = tflite.Model.GetRootAs(buf, 0)

    def vec(tab, voff, width, elem):
        o = tab.Offset(voff)
        if not o:
            return
        a = tab.Vector(o)
        out.append(("u32", a - 4))   # the vector's length
        count = tab.VectorLen(o)
        out.extend((width, a + elem * j) for j in range(min(count, 64)))

    def scalar(tab, voff, width):
        o = tab.Offset(voff)
        if o:
            out.append((width, tab.Pos + o))

    for i in range(m.OperatorCodesLength()):
        c = m.OperatorCodes(i)._tab
        scalar(c, 4, "u8")
        scalar(c, 10, "i32")
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)._tab
        o = b.Offset(4)
        if o:
            out.append(("u32", b.Vector(o) - 4))
    for s in range(m.SubgraphsLength()):   # subgraph 0 and every IF / WHILE / CALL_ONCE body
        sg = m.Subgraphs(s)
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            tab = t._tab
            vec(tab, 4, "i32", 4)         # shape
            scalar(tab, 6, "u8")          # type
            scalar(tab, 8, "u32")         # buffer index
            q = t.Quantization()
            if q is not None:
                vec(q._tab, 8, "f32", 4)  # scale
                vec(q._tab, 10, "i64", 8)  # zero point
                scalar(q._tab, 16, "i32")  # quantized dimension
        vec(sg._tab, 6, "i32", 4)
        vec(sg._tab, 8, "i32", 4)
        for k in range(sg.OperatorsLength()):
            op = sg.Operators(k)
            tab = op._tab
            scalar(tab, 4, "u32")         # opcode index
            vec(tab, 6, "i32", 4)
            vec(tab, 8, "i32", 4)
            scalar(tab, 10, "u8")         # builtin options type
            opts = op.BuiltinOptions()
            if opts is not None:
                vt = opts.Pos - struct.unpack_from("<i", buf, opts.Pos)[0]
                vsize = struct.unpack_from("<H", buf, vt)[0]
                for voff in range(4, vsize, 2):
                    fo = struct.unpack_from("<H", buf, vt + voff)[0]
                    if fo:
                        out.append(("u8", opts.Pos + fo))
    return out


def locate_data(buf: bytes, per_buffer: int = 16) -> list[tuple[str, int]]:
    """Positions inside the constant buffers (weights, biases): corrupting them never breaks
    the file's structure, so such mutants reach the kernels and the emitter with NaN, inf,
    huge or arbitrary constants (the structured fields above are mostly refused earlier)."""
    out: list[tuple[str, int]] = []
    m = tflite.Model.GetRootAs(buf, 0)
    for i in range(m.BuffersLength()):
        tab = m.Buffers(i)._tab
        o = tab.Offset(4)
        size = tab.VectorLen(o) if o else 0
        if size < 4:
            continue
        start = tab.Vector(o)
        for j in range(min(per_buffer, size // 4)):
            pos = start + 4 * ((j * (size // 4)) // min(per_buffer, size // 4))
            out += [("f32", pos), ("i32", pos), ("u8", pos)]
    return out


FMT = {"i32": "<i", "u32": "<I", "u8": "<B", "f32": "<f", "i64": "<q"}
SPECIAL = {
    "i32": [-1, 0, 1, 2, 3, 4, 7, 16, 255, 65535, 65536, 1 << 20, 1 << 24, 1 << 30,
            2 ** 31 - 1, -(2 ** 31), -2, -65536],
    "u32": [0, 1, 2, 3, 255, 65535, 1 << 20, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32 - 4],
    "u8": [0, 1, 2, 3, 4, 5, 6, 7, 9, 127, 128, 200, 255],
    "f32": [0.0, -1.0, 1.0, float("nan"), float("inf"), float("-inf"), 1e-45, 1e-38, 3e38,
            1e-30, 1e30, 0.5, 2.0 ** -20],
    "i64": [0, -1, 1, 127, 128, -128, -129, 255, 2 ** 31, -(2 ** 31) - 1, 2 ** 40, 2 ** 63 - 1,
            -(2 ** 63)],
}


def value_for(width: str):
    lo_hi = {"i32": (-(2 ** 31), 2 ** 31 - 1), "u32": (0, 2 ** 32 - 1), "u8": (0, 255),
             "i64": (-(2 ** 63), 2 ** 63 - 1)}
    special = st.sampled_from(SPECIAL[width])
    if width == "f32":
        return st.one_of(special, st.floats(width=32, allow_nan=True, allow_infinity=True))
    lo, hi = lo_hi[width]
    return st.one_of(special, st.integers(lo, hi), st.integers(-8, 64).filter(lambda v: lo <= v <= hi))


@st.composite
def field_writes(draw, fields):
    """1 to 3 structured corruptions of located fields."""
    writes = []
    for _ in range(draw(st.integers(1, 3))):
        width, pos = draw(st.sampled_from(fields))
        writes.append((pos, struct.pack(FMT[width], draw(value_for(width)))))
    return writes


@st.composite
def byte_mutations(draw, size: int):
    """Bit flips, byte overwrites, insertions, deletions and truncation at random places."""
    muts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "flip", "write", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, size - 1))
        if kind == "flip":
            muts.append(("flip", pos, draw(st.integers(0, 7))))
        elif kind == "write":
            muts.append(("write", pos, draw(st.binary(min_size=1, max_size=8))))
        elif kind == "insert":
            muts.append(("insert", pos, draw(st.binary(min_size=1, max_size=16))))
        elif kind == "delete":
            muts.append(("delete", pos, draw(st.integers(1, 16))))
        else:
            muts.append(("truncate", pos, None))
    return muts


def apply_writes(buf: bytes, writes) -> bytes:
    b = bytearray(buf)
    for pos, raw in writes:
        b[pos:pos + len(raw)] = raw
    return bytes(b[:len(buf)])


def apply_mutations(buf: bytes, muts) -> bytes:
    b = bytearray(buf)
    for kind, pos, arg in muts:
        pos = min(pos, max(len(b) - 1, 0))
        if kind == "flip" and b:
            b[pos] ^= 1 << arg
        elif kind == "write":
            b[pos:pos + len(arg)] = arg
        elif kind == "insert":
            b[pos:pos] = arg
        elif kind == "delete":
            del b[pos:pos + arg]
        elif kind == "truncate":
            del b[pos:]
    return bytes(b)


_SMALL: list[bytes] = []


def small_model() -> bytes:
    """A small int8 + float graph that compiles in milliseconds: the full-compile target for
    most examples."""
    if not _SMALL:
        rng = np.random.default_rng(0)
        mb = ModelBuilder()
        x = mb.input([1, 12], "int8", scale=0.05, zero_point=-3, name="x")
        w = mb.const(rng.integers(-127, 128, (8, 12)), "int8", scale=[0.01] * 8, zero_point=[0] * 8,
                     name="w")
        b = mb.const(rng.integers(-500, 500, (8,)), "int32", scale=[0.0005] * 8, zero_point=[0] * 8,
                     name="b")
        h = mb.tensor([1, 8], "int8", scale=0.1, zero_point=2, name="h")
        mb.op("FULLY_CONNECTED", [x, w, b], [h], "FullyConnectedOptions",
              fusedActivationFunction=ACT["RELU"])
        r = mb.tensor([2, 4], "int8", scale=0.1, zero_point=2, name="r")
        mb.op("RESHAPE", [h], [r])
        w2 = mb.const(rng.integers(-127, 128, (3, 4)), "int8", scale=0.02, zero_point=0, name="w2")
        y = mb.tensor([2, 3], "int8", scale=0.2, zero_point=-1, name="y")
        mb.op("FULLY_CONNECTED", [r, w2], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
        mb.output(y)
        xf = mb.input([1, 6], "float32", name="xf")
        wf = mb.const(rng.standard_normal((5, 6)), "float32", name="wf")
        yf = mb.tensor([1, 5], "float32", name="yf")
        mb.op("FULLY_CONNECTED", [xf, wf], [yf], "FullyConnectedOptions", fusedActivationFunction=ACT["RELU6"])
        mb.output(yf)
        _SMALL.append(mb.build())
    return _SMALL[0]
