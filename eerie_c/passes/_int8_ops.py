"""How each float op becomes its int8 form when fold_qdq.py folds it: weights and biases
recovered from the quantizer's scales, constant operands quantized, and the quantization
rules TFLite's int8 kernels impose (pooling and concatenation keep their input's parameters,
LOGISTIC / TANH / SOFTMAX write fixed ones), met by an int8 -> int8 requantization after the
op where the program asked for other parameters.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Op, Quant, Tensor
from ..kernels._int4 import INT4_OPS

# Activations an int8 op applies as its fused clamp (TFLite's fused_activation_function).
ACTIVATIONS = {"RELU", "RELU6", "RELU_N1_TO_1"}
FUSES_ACTIVATION = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL"}

# (weights input index, output-channel axis of the IR weights, bias input index)
WEIGHTED = {"CONV_2D": (1, 0, 2), "DEPTHWISE_CONV_2D": (1, 3, 2), "FULLY_CONNECTED": (1, 0, 2),
            "TRANSPOSE_CONV": (1, 0, 3)}

# Ops whose int8 kernels (as TFLM's) require the output to carry the input's parameters:
# they move or select values without rescaling (TFLM's RELU6 clamps without rescaling too).
SAME_QUANT = {"RELU6", "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "TRANSPOSE", "SQUEEZE", "EXPAND_DIMS",
              "SLICE", "STRIDED_SLICE", "PAD", "PADV2", "MIRROR_PAD", "CONCATENATION", "PACK",
              "UNPACK", "SPLIT", "SPLIT_V", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR",
              "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "GATHER", "REDUCE_MAX", "REDUCE_MIN",
              "BROADCAST_TO", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "REVERSE_V2"}
# Ops that only move values: with no QUANTIZE after them they still run in int8, keeping the
# input's parameters (a quantizer does not annotate a view or a flatten).
MOVES_VALUES = {"RESHAPE", "TRANSPOSE", "SQUEEZE", "EXPAND_DIMS", "SLICE", "STRIDED_SLICE",
                "CONCATENATION", "PACK", "UNPACK", "SPLIT", "SPLIT_V", "MAX_POOL_2D",
                "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "GATHER",
                "REDUCE_MAX", "REDUCE_MIN", "BROADCAST_TO", "PAD", "PADV2", "REVERSE_V2"}
# Ops that change only the layout of the values, not which values there are.
LAYOUT = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE"}
# What may sit between an op and the QUANTIZE that gives its result's parameters: the op then
# writes int8 at those parameters and these run in int8 at the same ones (a transposed conv's
# crop, a grouped conv's concatenation of its groups).
PASS_THROUGH = LAYOUT | {"SLICE", "STRIDED_SLICE", "CONCATENATION"}
# The attributes of an int8 -> int8 QUANTIZE this pass makes: the program requantizes by
# dequantizing and quantizing again in float (rounded once, half to even), and the kernel
# reproduces that exactly (kernels/quantize.py), not TFLM's fixed-point rounding.
REQUANTIZE = {"rounding": "half_even"}
# int8 kernels with a fixed output scale and zero point (TFLM's LOGISTIC, TANH, SOFTMAX).
FIXED_OUTPUT = {"LOGISTIC": (1.0 / 256, -128), "TANH": (1.0 / 128, 0), "SOFTMAX": (1.0 / 256, -128)}


def int8_kernel_exists(kind: str) -> bool:
    from ..kernels import load_all
    info = load_all().get(kind)
    return info is not None and ("int8" in info.dtypes or "any" in info.dtypes)


def covering_quant(quants: list[Quant]) -> Quant:
    """Per-tensor int8 parameters whose range covers every one of `quants`' ranges: the finest
    of them that does, or else the union range over 256 levels (zero exactly representable)."""
    def rng(q):
        s, z = float(q.scale[0]), int(q.zero_point[0])
        return (-128 - z) * s, (127 - z) * s
    lo = min(rng(q)[0] for q in quants)
    hi = max(rng(q)[1] for q in quants)
    covering = [q for q in quants if rng(q)[0] <= lo and rng(q)[1] >= hi]
    if covering:
        return min(covering, key=lambda q: float(q.scale[0]))
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(np.float32((hi - lo) / 255.0))
    return _quant(scale, int(np.clip(np.round(-128 - lo / scale), -128, 127)))


def _quant(scale, zp, axis=0) -> Quant:
    return Quant(np.asarray(scale, np.float32).reshape(-1), np.asarray(zp, np.int64).reshape(-1), axis)


class Folder:
    """The int8 rewrite of one op; fold_qdq._Fold walks the graph and calls it."""

    def __init__(self, g: Graph):
        self.g = g
        self.why_not = ""
        self.n = 0
        self.view: dict[str, str] = {}      # float tensor id -> int8 tensor it dequantizes

    # ---- small helpers -----------------------------------------------------------------

    def dtype(self, tid: str) -> str:
        return self.g.t(tid).dtype

    @staticmethod
    def same_quant(a: Tensor, b: Tensor) -> bool:
        qa, qb = a.quant, b.quant
        return (qa is not None and qb is not None and a.dtype == b.dtype
                and np.array_equal(qa.scale.astype(np.float32), qb.scale.astype(np.float32))
                and np.array_equal(qa.zero_point, qb.zero_point))

    def fresh(self, like: str, shape, dtype: str, quant: Quant | None, data=None, label="") -> str:
        while True:
            self.n += 1
            tid = f"{like}_q{self.n}"[:60]
            if tid not in self.g.tensors:
                break
        self.g.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), dtype,
                                     label or self.g.t(like).label, quant, data)
        return tid

    @staticmethod
    def requantize(op: Op, src: str, dst: str, name: str = "") -> Op:
        """The int8 -> int8 QUANTIZE of src into dst's parameters, beside op, rounding as the
        program does (REQUANTIZE)."""
        return Op("QUANTIZE", [src], [dst], dict(REQUANTIZE), name or f"{op.name}_requant", op.index,
                  op.subgraph)

    def refuse(self, why: str):
        self.why_not = why
        return None

    # ---- folding one op with a QUANTIZE after it ----------------------------------------

    def fold(self, op: Op, act: Op | None, out: str) -> list[Op] | None:
        """The int8 form of `op` writing `out` (an int8 tensor with the program's parameters),
        or None (self.why_not says why)."""
        g = self.g
        if not int8_kernel_exists(op.kind):
            return self.refuse(f"no int8 kernel for {op.kind}")
        attrs = dict(op.attrs)
        if act is not None:
            attrs["fused_activation_function"] = act.kind
        if op.kind == "MEAN":   # the float mean of the program, rounded once (kernels/mean.py)
            attrs["rounding"] = "single"
        ins = [self.view.get(t, t) if t is not None else None for t in op.inputs]
        if op.kind == "AVERAGE_POOL_2D" and op.attrs.get("padding") == "VALID" \
                and not self.same_quant(g.t(ins[0]), g.t(out)):
            return [self.rescaling_pool(op, ins[0], out, attrs)]
        if op.kind in WEIGHTED:
            ins = self.weights_and_bias(op, ins)
        elif op.kind == "CONCATENATION":
            return self.fold_concat(op, ins, out)
        else:
            ins = self.const_operands(op, ins, out)
        if ins is None:
            return None
        pre = []
        x0 = next((t for t in ins if t is not None and not g.t(t).is_const and g.t(t).dtype == "int8"), None)
        if op.kind in ("RESIZE_BILINEAR", "AVERAGE_POOL_2D") and x0 is not None \
                and not self.same_quant(g.t(x0), g.t(out)):
            # Interpolate (or average) then requantize would round twice, and the two roundings
            # err the same way on a third of the values: the kernel's rescaling form rounds once.
            attrs["rescale"] = True
            return pre + [Op(op.kind, ins, [out], attrs, op.name, op.index, op.subgraph, op.regions)]
        need = None
        if op.kind in SAME_QUANT and x0 is not None:
            need = g.t(x0).quant
        elif op.kind in FIXED_OUTPUT:
            need = _quant(*FIXED_OUTPUT[op.kind])
        if need is not None and not self.same_quant(Tensor("", (), "int8", quant=need), g.t(out)):
            mid = self.fresh(out, g.t(out).shape, "int8", need)
            return pre + [Op(op.kind, ins, [mid], attrs, op.name, op.index, op.subgraph, op.regions),
                          self.requantize(op, mid, out)]
        return pre + [Op(op.kind, ins, [out], attrs, op.name, op.index, op.subgraph, op.regions)]

    def rescaling_pool(self, op: Op, x: str, out: str, attrs: dict) -> Op:
        """A VALID average pool whose output has other parameters than its input: TFLM's int8
        pool cannot rescale, and pooling at the input's parameters then requantizing rounds
        twice (up to 1.5 steps off eager). One rounding instead: a pool over the whole image
        is a MEAN (which rescales); any other, a depthwise conv with int8 weights of 1 at
        scale 1 / (kh * kw)."""
        g = self.g
        kh, kw = int(attrs["filter_height"]), int(attrs["filter_width"])
        n, h, w_, c = g.t(x).shape
        if (kh, kw) == (h, w_):
            axes = self.fresh(x, (2,), "int32", None, np.array([1, 2], np.int32), label=f"{op.name}_axes")
            mean = {"keep_dims": True, "rounding": "single"}
            if "torch_source" in attrs:
                mean["torch_source"] = attrs["torch_source"]
            return Op("MEAN", [x, axes], [out], mean, op.name, op.index, op.subgraph)
        w = self.fresh(x, (1, kh, kw, c), "int8", _quant(np.full(c, 1.0 / (kh * kw)), np.zeros(c), 3),
                       np.ones((1, kh, kw, c), np.int8), label=f"{op.name}_ones")
        s_b = np.float32(g.t(x).scale) * np.float32(1.0 / (kh * kw))
        b = self.fresh(x, (c,), "int32", _quant(np.full(c, s_b), np.zeros(c)), np.zeros(c, np.int32),
                       label=f"{op.name}_bias")
        dw = {"padding": "VALID", "stride_h": attrs["stride_h"], "stride_w": attrs["stride_w"],
              "dilation_h_factor": 1, "dilation_w_factor": 1, "depth_multiplier": 1,
              "fused_activation_function": attrs.get("fused_activation_function", "NONE")}
        for k in ("torch_source",):
            if k in attrs:
                dw[k] = attrs[k]
        return Op("DEPTHWISE_CONV_2D", [x, w, b], [out], dw, op.name, op.index, op.subgraph)

    def fold_concat(self, op: Op, ins, out) -> list[Op]:
        """TFLM's int8 CONCATENATION needs every input at the output's parameters: requantize
        the inputs that differ first. A float constant (a ViT's class token) is quantized now,
        at the output's parameters, as the program's QUANTIZE after the float concatenation
        would quantize those values."""
        g = self.g
        made, new_ins = [], []
        for t in ins:
            if g.t(t).is_const and g.t(t).dtype == "float32":
                new_ins.append(self.quantize_const(t, g.t(out).quant))
                continue
            if g.t(t).is_const or self.same_quant(g.t(t), g.t(out)):
                new_ins.append(t)
                continue
            r = self.fresh(out, g.t(t).shape, "int8", g.t(out).quant)
            made.append(self.requantize(op, t, r))
            new_ins.append(r)
        return made + [Op(op.kind, new_ins, [out], dict(op.attrs), op.name, op.index, op.subgraph)]

    def fold_moving(self, op: Op) -> list[Op] | None:
        """An op that only moves values, with no QUANTIZE after it: int8 outputs with the
        input's parameters (every activation input must share them)."""
        g = self.g
        if op.kind not in MOVES_VALUES or not int8_kernel_exists(op.kind):
            return None
        acts = [t for t in op.inputs if t is not None and not g.t(t).is_const]
        views = [self.view[t] for t in acts]
        made: list[Op] = []
        ins = [self.view.get(t, t) if t is not None else None for t in op.inputs]
        if any(not self.same_quant(g.t(v), g.t(views[0])) for v in views[1:]):
            if op.kind != "CONCATENATION":
                return None
            # A concatenation of values at different parameters (ShuffleNet's identity half
            # and branch): one set that covers them all, the others requantized into it.
            quant = covering_quant([g.t(v).quant for v in views])
            for k, t in enumerate(ins):
                if not g.t(t).is_const and not self.same_quant(g.t(t), Tensor("", (), "int8", quant=quant)):
                    r = self.fresh(t, g.t(t).shape, "int8", quant)
                    made.append(self.requantize(op, t, r))
                    ins[k] = r
        else:
            quant = g.t(views[0]).quant
        if op.kind == "PADV2" and self.pads_for_max_pool(op):
            # Padding with -inf for a max pool: the lowest int8 value never wins either.
            ins[2] = self.fresh(op.inputs[2], (), "int8", quant, np.array(-128, np.int8))
        if any(t is not None and g.t(t).is_const and g.t(t).dtype == "float32" for t in ins):
            return None   # a float pad value and the like
        outs = []
        for y in op.outputs:
            v = self.fresh(y, g.t(y).shape, "int8", quant)
            self.view[y] = v
            outs.append(v)
        return made + [Op(op.kind, ins, outs, dict(op.attrs), op.name, op.index, op.subgraph)]

    def pads_for_max_pool(self, op: Op) -> bool:
        """PADV2 with -inf (the frontend's explicit padding of a max pool) read only by max
        pools: in int8 the pad value -128 gives the same maxima, since every window holds
        at least one input value."""
        g = self.g
        value = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
        if value is None or not value.is_const or value.dtype != "float32" or value.size != 1 \
                or not np.isneginf(value.data).all():
            return False
        readers = g.readers(regions=True).get(op.outputs[0], [])
        return bool(readers) and op.outputs[0] not in g.outputs \
            and all(r.kind == "MAX_POOL_2D" and r.inputs[0] == op.outputs[0] for r in readers)

    # ---- constants ------------------------------------------------------------------------

    def weights_and_bias(self, op: Op, ins):
        g = self.g
        wi, axis, bi = WEIGHTED[op.kind]
        x = ins[2] if op.kind == "TRANSPOSE_CONV" else ins[0]
        w = g.t(ins[wi])
        if not w.is_const or w.dtype != "float32":
            return self.refuse("its weights are not constants")
        found = self.int8_weights(w, axis)
        if found is None:
            return None
        q, wq, bits4 = found
        ins = list(ins)
        ins[wi] = self.fresh(w.id, w.shape, "int8", wq, q, label=w.label)
        # a weight observer with a 4-bit range (quant_min >= -8, quant_max <= 7): 4-bit
        # weights, packed two per byte by the kernels that read them (kernels/_int4.py)
        g.tensors[ins[wi]].int4 = bits4 and op.kind in INT4_OPS
        if bi < len(ins) and ins[bi] is not None:
            b = g.t(ins[bi])
            if not b.is_const or b.dtype != "float32":
                return self.refuse("its bias is not a constant")
            s_in = np.float64(np.float32(g.t(x).scale))
            s = s_in * wq.scale.astype(np.float64)
            s = np.broadcast_to(s, b.shape) if s.size == 1 else s
            qb = np.round(b.data.astype(np.float64) / s)
            if np.any(np.abs(qb) > 2 ** 31 - 1):
                return self.refuse("its bias does not fit int32 at scale input * weight scale")
            ins[bi] = self.fresh(b.id, b.shape, "int32", _quant(s, np.zeros(s.size)), qb.astype(np.int32),
                                 label=b.label)
        return ins

    def int8_weights(self, w: Tensor, axis: int):
        """(int8 data, Quant, whether the observer's range was 4-bit) that dequantize exactly
        to the float weights, using the scales of the program's dequantized constants
        (Graph.quant_hints)."""
        c = w.shape[axis]
        shape = [1] * len(w.shape)
        shape[axis] = c
        for scale, zp, qmin, qmax in self.g.quant_hints:
            if qmin < -128 or qmax > 127:
                # a bias's int32 scale: a lone weight divided by it is some integer too, and
                # int8 storage would wrap it (a 1x1 one-channel conv got a bias's scale of
                # 8e-10 and weight 39: every output its zero point)
                continue
            if scale.size == 1:
                windows = [(scale, zp)]
            elif scale.size % c == 0:
                windows = [(scale[k:k + c], zp[k:k + c]) for k in range(0, scale.size, c)]
            else:
                continue
            for s, z in windows:
                if np.any(z != 0):
                    continue   # TFLite's int8 weights are symmetric
                sb = s.astype(np.float32).reshape(shape) if s.size > 1 else s.astype(np.float32).reshape(())
                qv = np.round(w.data.astype(np.float64) / sb.astype(np.float64))
                if np.any(qv < qmin) or np.any(qv > qmax) or np.any(~np.isfinite(qv)):
                    continue
                back = qv.astype(np.float32) * sb
                if np.array_equal(back.astype(np.float32), w.data):
                    ch = np.broadcast_to(s.astype(np.float32), (c,)) if s.size == 1 else s
                    quant = _quant(ch, np.zeros(c), axis) if s.size > 1 else _quant(s, [0], 0)
                    return qv.astype(np.int8), quant, -8 <= qmin and qmax <= 7
        return self.refuse("its weights are not the dequantization of int8 weights "
                           "(the quantizer left them in float)")

    def quantize_const(self, t: str, quant: Quant) -> str:
        """An int8 copy of float constant `t` at per-tensor `quant`, rounded as PT2E's
        quantize_per_tensor (and the QUANTIZE kernel for it) rounds: rint(x * float32(1 /
        scale)) + zero point, half to even, saturated."""
        scale, zp = float(quant.scale[0]), int(quant.zero_point[0])
        x = self.g.t(t).data.astype(np.float32)
        q = np.rint(x * np.float32(1.0 / scale)).astype(np.float64) + zp
        return self.fresh(t, self.g.t(t).shape, "int8", _quant(scale, zp),
                          np.clip(q, -128, 127).astype(np.int8))

    def const_operands(self, op: Op, ins, out):
        """Float constant operands of an element-wise op, quantized on their own range (asymmetric
        int8, as the TFLite converter does). Integer constants (axes, shapes) stay as they are."""
        g = self.g
        new = []
        for t in ins:
            if t is None or not g.t(t).is_const or g.t(t).dtype != "float32":
                new.append(t)
                continue
            data = g.t(t).data.astype(np.float64)
            if data.size and not np.all(np.isfinite(data)):
                return self.refuse("a constant operand is not finite")
            lo, hi = min(float(data.min(initial=0.0)), 0.0), max(float(data.max(initial=0.0)), 0.0)
            scale = (hi - lo) / 255.0 if hi > lo else 1.0
            zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
            q = np.clip(np.round(data / scale) + zp, -128, 127).astype(np.int8)
            new.append(self.fresh(t, g.t(t).shape, "int8", _quant(scale, zp), q))
        return new
