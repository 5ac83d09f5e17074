"""Lowerings of the PyTorch neural-network ops with weights: convolution (1-D, 2-D, depthwise,
grouped, transposed), eval-mode batch norm (folded into the convolution or linear layer that
feeds it, else MUL + ADD), and matrix products (linear / addmm / mm -> FULLY_CONNECTED, products
of two computed tensors and bmm -> BATCH_MATMUL).

Also the NCHW <-> NHWC helpers and torch-to-TFLite padding geometry that pooling shares.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...errors import EerieError
from .lower_shape import _slice_op
from .registry import lowers
from .values import Act
if TYPE_CHECKING:   # for annotations only: the walker imports this module
    from .walker import Lowerer


# ---- NCHW <-> NHWC and torch's padding as TFLite's (shared with lower_pool.py) ----------

def _pairs(v, n=2):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _same_padding_matches(size, k, s, d, p) -> bool:
    """True when torch's symmetric padding p gives exactly TFLite's SAME windows."""
    torch_out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    same_out = (size + s - 1) // s
    total = max((same_out - 1) * s + (k - 1) * d + 1 - size, 0)
    return torch_out == same_out and total // 2 == p


def _geometry(L: Lowerer, x: Act, k, s, d, p, what: str, allow_pad_op=True, pad_value=None):
    """(input to the NHWC op, padding 'SAME'/'VALID'): an explicit PAD where torch's padding is
    not TFLite's SAME."""
    _, h, w, _ = L.t(x).shape
    if p == [0, 0]:
        return x, "VALID"
    if all(_same_padding_matches(n, kk, ss, dd, pp) for n, kk, ss, dd, pp in zip((h, w), k, s, d, p)):
        return x, "SAME"
    if not allow_pad_op:
        raise EerieError(f"{what}: padding {p} with kernel {k}, stride {s} has no TFLite equivalent")
    pads = np.array([[0, 0], [p[0], p[0]], [p[1], p[1]], [0, 0]], np.int32)
    n, h, w, c = L.t(x).shape
    ins = [x, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if pad_value is not None:
        kind = "PADV2"
        ins.append(L.const(np.array(pad_value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, (n, h + 2 * p[0], w + 2 * p[1], c), L.t(x).dtype), "VALID"


def _nchw_in(L: Lowerer, x: Act, what: str) -> Act:
    if len(L.t(x).shape) != 4:
        raise EerieError(f"{what}: expected a 4-D NCHW tensor, got {list(L.t(x).shape)}")
    return L.transpose(x, [0, 2, 3, 1])


def _nchw_out(L: Lowerer, y: Act) -> Act:
    return L.transpose(y, [0, 3, 1, 2])


# ---- batch norm: folded into the op that feeds it, or MUL + ADD --------------------------------

def _bn_fold_for(L: Lowerer, node):
    """(scale, shift) when the only user of `node` is an eval-mode batch norm, else None."""
    users = list(node.users)
    if len(users) != 1:
        return None
    bn = users[0]
    if getattr(bn.target, "__name__", "") != "_native_batch_norm_legit_no_training.default" \
            or bn.args[0] is not node:
        return None
    return bn


def _bn_params(L: Lowerer, weight, bias, mean, var, eps):
    torch = L.torch
    for v in (weight, bias, mean, var):
        if isinstance(v, Act):
            raise EerieError("batch norm with computed (non-constant) statistics is not supported")
    c = mean.shape[0]
    w = weight if weight is not None else torch.ones(c)
    b = bias if bias is not None else torch.zeros(c)
    scale = w.double() / torch.sqrt(var.double() + eps)
    shift = b.double() - mean.double() * scale
    return scale, shift


def _bn_arg(L, bn, i):
    a = bn.args[i]
    if a is None:
        return None
    v = L.env.get(a)
    if v is None or isinstance(v, Act):
        raise EerieError(f"batch norm {bn.name}: its parameters must be constants")
    return v


# ---- convolution ---------------------------------------------------------------------------------

@lowers("convolution.default")
def _conv(L: Lowerer, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    torch = L.torch
    what = f"convolution {node.name}"
    x = L.ensure_act(x, what)
    if isinstance(w, Act) or isinstance(b, Act):
        raise EerieError(f"{what}: weights and bias must be constants (parameters)")
    if transposed:
        return _conv_transpose(L, node, x, w, b, stride, padding, dilation, output_padding, groups)
    rank = len(L.t(x).shape)
    one_d = rank == 3
    if one_d:   # conv1d: a conv2d over a height of one
        # NCW -> NWC by a 3-D transpose, then a height of one: between two conv1d layers the
        # transposes then meet across PAD, ADD and the like (passes/cancel_transposes.py).
        n, c, length = L.t(x).shape
        x = L.reshape(L.transpose(x, [0, 2, 1]), (n, 1, length, c))
        w = w.unsqueeze(2)
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
    elif rank != 4:
        raise EerieError(f"{what}: {rank - 2}-D convolution is not supported")
    w = w.detach().double()
    b = b.detach().double() if b is not None else None
    bn = _bn_fold_for(L, node)
    if bn is not None:
        scale, shift = _bn_params(L, *[_bn_arg(L, bn, i) for i in (1, 2, 3, 4)], bn.args[6])
        w = w * scale.reshape(-1, 1, 1, 1)
        b = (b if b is not None else torch.zeros(w.shape[0], dtype=torch.float64)) * scale + shift
        L.folded_bn[bn] = True
    k = list(w.shape[2:])
    s, d, p = _pairs(stride), _pairs(dilation), _pairs(padding)
    xn = x if one_d else _nchw_in(L, x, what)
    out_c, in_per_group = w.shape[0], w.shape[1]
    in_c = L.t(xn).shape[3]
    xin, pad = _geometry(L, xn, k, s, d, p, what)
    n = L.t(xin).shape[0]
    oshape = L.meta_shape()
    if one_d:
        oshape = (oshape[0], oshape[1], 1, oshape[2])
    nhwc = (n, oshape[2], oshape[3], out_c)
    attrs = {"padding": pad, "stride_h": s[0], "stride_w": s[1], "dilation_h_factor": d[0],
             "dilation_w_factor": d[1], "fused_activation_function": "NONE"}

    def conv(xi, wi, bi, kind, extra=None):
        ins = [xi, L.const(wi.float(), "float32", "weights")]
        ins.append(L.const(bi.float(), "float32", "bias") if bi is not None else None)
        return L.op(kind, ins, (n, nhwc[1], nhwc[2], wi.shape[-1] if kind == "DEPTHWISE_CONV_2D" else wi.shape[0]),
                    "float32", {**attrs, **(extra or {})})

    if groups == 1:
        y = conv(xin, w.permute(0, 2, 3, 1).contiguous(), b, "CONV_2D")
    elif groups == in_c and in_per_group == 1:
        y = conv(xin, w.permute(1, 2, 3, 0).contiguous(), b, "DEPTHWISE_CONV_2D",
                 {"depth_multiplier": out_c // in_c})
    else:
        # Grouped: one CONV_2D per group on a channel slice, then concatenated.
        parts = []
        og = out_c // groups
        _, h, wd, _ = L.t(xin).shape
        for gi in range(groups):
            xs = _slice_op(L, xin, 3, gi * in_per_group, (gi + 1) * in_per_group, 1)
            wi = w[gi * og:(gi + 1) * og].permute(0, 2, 3, 1).contiguous()
            bi = b[gi * og:(gi + 1) * og] if b is not None else None
            parts.append(conv(xs, wi, bi, "CONV_2D"))
        y = L.op("CONCATENATION", parts, nhwc, "float32", {"axis": 3, "fused_activation_function": "NONE"})
    if one_d:   # NHWC with a height of one -> NWC -> NCW
        return L.transpose(L.reshape(y, (n, nhwc[2], out_c)), [0, 2, 1])
    return _nchw_out(L, y)


def _conv_transpose(L: Lowerer, node, x, w, b, stride, padding, dilation, output_padding, groups):
    """conv_transpose1d/2d, float32: TRANSPOSE_CONV with VALID padding onto the full output
    ((in - 1) * stride + k), then the rows and columns torch's padding removes are sliced off
    (output_padding keeps up to `padding` more at the end)."""
    what = f"transposed convolution {node.name}"
    rank = len(L.t(x).shape)
    one_d = rank == 3
    if one_d:
        n, c, length = L.t(x).shape
        x = L.reshape(x, (n, c, 1, length))
        w = w.unsqueeze(2)
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
        output_padding = [0, output_padding[0]]
    elif rank != 4:
        raise EerieError(f"{what}: {rank - 2}-D transposed convolution is not supported")
    s, p, d = _pairs(stride), _pairs(padding), _pairs(dilation)
    if d != [1, 1] or groups != 1:
        raise EerieError(f"{what}: dilated or grouped transposed convolution is not supported")
    w = w.detach().float()                      # [in_c, out_c, kh, kw]
    out_c, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    xn = _nchw_in(L, x, what)
    n, h, wd, _ = L.t(xn).shape
    full = ((h - 1) * s[0] + kh, (wd - 1) * s[1] + kw)
    oshape = L.meta_shape()
    if one_d:
        oshape = (oshape[0], oshape[1], 1, oshape[2])
    oh, ow = oshape[2], oshape[3]
    if p[0] + oh > full[0] or p[1] + ow > full[1]:
        raise EerieError(f"{what}: output_padding larger than padding is not supported")
    ins = [L.const(np.array([n, full[0], full[1], out_c], np.int32), "int32", "output_shape"),
           L.const(w.permute(1, 2, 3, 0).contiguous(), "float32", "weights"), xn,
           L.const(b.detach().float(), "float32", "bias") if b is not None else None]
    y = L.op("TRANSPOSE_CONV", ins, (n, full[0], full[1], out_c), "float32",
             {"padding": "VALID", "stride_h": s[0], "stride_w": s[1], "fused_activation_function": "NONE"})
    y = _slice_op(L, y, 1, p[0], p[0] + oh, 1)
    y = _slice_op(L, y, 2, p[1], p[1] + ow, 1)
    y = _nchw_out(L, y)
    return L.reshape(y, L.meta_shape()) if one_d else y


@lowers("_native_batch_norm_legit_no_training.default")
def _batch_norm(L: Lowerer, node, x, weight, bias, mean, var, momentum, eps):
    if L.folded_bn.get(node):
        return (x, None, None)
    x = L.ensure_act(x, f"batch norm {node.name}")
    scale, shift = _bn_params(L, weight, bias, mean, var, eps)
    rank = len(L.t(x).shape)
    bshape = (-1,) + (1,) * (rank - 2)
    shp = L.t(x).shape
    y = L.op("MUL", [x, L.const(scale.float().reshape(bshape), "float32", "bn_scale")], shp, "float32",
             {"fused_activation_function": "NONE"})
    y = L.op("ADD", [y, L.const(shift.float().reshape(bshape), "float32", "bn_shift")], shp, "float32",
             {"fused_activation_function": "NONE"})
    return (y, None, None)


# ---- matrix products -----------------------------------------------------------------------------

@lowers("addmm", "mm", "linear")
def _matmul(L, node, *args, **kw):
    torch = L.torch
    key = node.target.__name__.split(".")[0]
    if key == "addmm":
        bias, x, w = args[:3]
        if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
            raise EerieError(f"{node.name}: addmm with alpha/beta is not supported")
        wt = None if isinstance(w, Act) else w.T
    elif key == "mm":
        x, w = args
        bias = None
        wt = None if isinstance(w, Act) else w.T
    else:
        x, w = args[:2]
        bias = args[2] if len(args) > 2 else None
        wt = None if isinstance(w, Act) else w
    if not isinstance(x, Act) or wt is None or isinstance(bias, Act):
        # A product of two computed tensors (or a constant on the left): BATCH_MATMUL.
        y = _batch_matmul(L, node, x, w, adj_y=key == "linear")
        if bias is not None:
            y = L.op("ADD", [y, L.act_of(bias, y)], L.meta_shape(), "float32",
                     {"fused_activation_function": "NONE"})
        return y
    wt = wt.detach().double()
    units = wt.shape[0]
    b = None
    if bias is not None:
        b = torch.broadcast_to(bias.detach().double(), (units,)) if bias.dim() <= 1 else None
        if b is None:
            raise EerieError(f"{node.name}: a bias that varies per row is not supported")
    bn = _bn_fold_for(L, node)
    if bn is not None and len(L.meta_shape()) == 2:
        scale, shift = _bn_params(L, *[_bn_arg(L, bn, i) for i in (1, 2, 3, 4)], bn.args[6])
        wt = wt * scale.reshape(-1, 1)
        b = (b if b is not None else torch.zeros(units, dtype=torch.float64)) * scale + shift
        L.folded_bn[bn] = True
    ins = [x, L.const(wt.float().contiguous(), "float32", "weights"),
           L.const(b.float(), "float32", "bias") if b is not None else None]
    return L.op("FULLY_CONNECTED", ins, L.meta_shape(), "float32",
                {"fused_activation_function": "NONE", "keep_num_dims": len(L.meta_shape()) > 2})


def _batch_matmul(L, node, a, b, adj_y=False):
    """a @ b (b transposed in its last two dims when adj_y) as a float32 BATCH_MATMUL; either
    operand may be a constant."""
    if any(isinstance(v, Act) and L.t(v).dtype != "float32" for v in (a, b)):
        raise EerieError(f"{node.name}: matrix products are supported for float32 only")
    if len(L.shape(a)) < 2 or len(L.shape(b)) < 2:
        raise EerieError(f"{node.name}: matrix products of vectors (1-D operands) are not supported")
    ins = [a if isinstance(a, Act) else L.const(a.detach().float().contiguous(), "float32", "lhs"),
           b if isinstance(b, Act) else L.const(b.detach().float().contiguous(), "float32", "rhs")]
    return L.op("BATCH_MATMUL", ins, L.meta_shape(), "float32", {"adj_x": False, "adj_y": bool(adj_y)})


@lowers("bmm")
def _bmm(L, node, a, b):
    return _batch_matmul(L, node, a, b)
