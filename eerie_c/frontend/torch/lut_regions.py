"""Element-wise computations of one int8 value, found in a PT2E program and run as one table.

A converted PT2E program computes `quantize(f(dequantize(q)))` for each element, where f is
any chain of element-wise float ops (tanh; x - tanh(x); x / (1 + |x|); with or without the
quantizer's own quantize / dequantize pairs between them). Lowered op by op, each int8 kernel
rounds its own result, and TFLM's int8 TANH / LOGISTIC round to their fixed output scales
first: two roundings where the program has one, and the int8 output ends up two steps off
the converted module (found by the differential tester: conv > tanhshrink, linear >
softsign). But q has only 256 values: torch evaluates the region's own nodes on all of them
at compile time, and the region becomes one TABLE_LOOKUP (kernels/table_lookup.py), equal to
the converted program's arithmetic by construction.

A region: the nodes between one int8 source (a quantize whose input is not element-wise, e.g.
a convolution's result) and a quantize to int8 (its end), every node element-wise with
constant scalar operands, every node read only inside the region (or the end), at least one
op that is neither a quantize / dequantize nor a clamp (those already run exactly in int8).
"""
from __future__ import annotations

from .lower_quant import QUANTIZE_OPS

# ATen ops (by overload packet) computed element by element, so a function of the one value
ELEMENTWISE = {
    "abs", "neg", "add", "sub", "rsub", "mul", "div", "true_divide", "reciprocal", "square",
    "pow", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "tanh", "sigmoid", "hardsigmoid", "hardswish", "silu", "mish", "gelu", "elu", "selu", "celu",
    "softplus", "relu", "relu6", "hardtanh", "leaky_relu", "clamp", "clamp_min", "clamp_max",
    "sin", "cos", "erf", "sign", "minimum", "maximum", "clone", "alias", "alias_copy",
    "tanhshrink", "softsign", "hardshrink", "softshrink", "logit", "threshold",
    "quantize_per_tensor", "dequantize_per_tensor",
}
# exact in int8 already (and fused into the op before them): no table for these alone
CLAMPS = {"relu", "relu6", "hardtanh", "clamp", "clamp_min", "clamp_max", "clone", "alias",
          "alias_copy"}
QDQ = {"quantize_per_tensor", "dequantize_per_tensor"}


def _packet(node) -> str:
    return getattr(node.target, "__name__", str(node.target)).split(".")[0]


def _is_quantize_int8(node, torch) -> bool:
    if node.op != "call_function" or getattr(node.target, "__name__", "") not in QUANTIZE_OPS:
        return False
    dtype = node.args[5] if len(node.args) > 5 else node.kwargs.get("dtype")
    return dtype == torch.int8


def _const_nodes(gm, user_inputs: set[str]) -> set:
    """Nodes whose values the walker knows at compile time (it evaluates them with torch):
    parameters, buffers, constants, and calls on those alone."""
    const = set()
    for n in gm.graph.nodes:
        if n.op == "get_attr" or (n.op == "placeholder" and n.name not in user_inputs):
            const.add(n)
        elif n.op == "call_function" and all(a in const for a in n.all_input_nodes) \
                and _packet(n) in ELEMENTWISE | {"dequantize_per_channel"}:
            const.add(n)
    return const


def find_regions(gm, user_inputs, torch) -> dict:
    """{end quantize node: (source node, region nodes in graph order)} for the top-level graph."""
    const = _const_nodes(gm, set(user_inputs))
    order = {n: k for k, n in enumerate(gm.graph.nodes)}
    found: dict = {}
    taken: set = set()
    for end in reversed(list(gm.graph.nodes)):   # the last end first: the largest region
        if not _is_quantize_int8(end, torch) or end in taken:
            continue
        region, sources, todo, ok = set(), set(), [end.args[0]], True
        while todo and ok:
            n = todo.pop()
            if n in region or n in sources or n in const or not hasattr(n, "op"):
                continue
            if n.op != "call_function" or _packet(n) not in ELEMENTWISE:
                ok = False
            elif _is_quantize_int8(n, torch) and not _grows_through(n, const):
                sources.add(n)
            else:
                region.add(n)
                todo += list(n.all_input_nodes)
        if not ok or len(sources) != 1 or region & taken:
            continue
        (source,) = sources
        if any(u not in region and u is not end for n in region for u in n.users):
            continue
        compute = {_packet(n) for n in region} - QDQ
        if not compute or compute <= CLAMPS:
            continue
        if not _same_shape(source, end):
            continue
        nodes = sorted(region | {end}, key=order.__getitem__)
        found[end] = (source, nodes)
        taken |= region | {end}
    return found


def _grows_through(q, const) -> bool:
    """A quantize inside a region (the quantizer's pair after a tanh) rather than its source:
    what it quantizes is itself element-wise, computed, and from one value. A residual add of
    two tensors is element-wise too but a function of two: its quantize is a source (else the
    region behind it has two sources and no table is made, and TFLM's TANH rounding to its
    fixed 1/128 scale made a tanhshrink after a residual add 48 steps off: campaign seed
    20261130, pt2e-cortexm case 86)."""
    x = q.args[0]
    return hasattr(x, "op") and x not in const and x.op == "call_function" and _packet(x) in ELEMENTWISE \
        and _packet(x) not in QDQ and len([a for a in x.all_input_nodes if a not in const]) <= 1


def _same_shape(source, end) -> bool:
    a, b = source.meta.get("val"), end.meta.get("val")
    return a is not None and b is not None and tuple(a.shape) == tuple(b.shape)


def evaluate(torch, source, nodes, env) -> tuple | None:
    """(the 256 int8 results for source values -128..127, a short description), or None when
    the region does not evaluate to 256 int8 values, or meets a NaN (the caller then lowers it
    op by op)."""
    fx = torch.fx
    vals = {source: torch.arange(-128, 128, dtype=torch.int8)}

    def arg(a):
        if isinstance(a, fx.Node):
            v = vals[a] if a in vals else env.get(a)
            if v is None or (isinstance(v, torch.Tensor) and a not in vals and v.numel() != 1):
                raise _NotScalar
            return v
        return a
    try:
        with torch.no_grad():
            for n in nodes:
                args = fx.node.map_aggregate(n.args, arg)
                kwargs = fx.node.map_aggregate(dict(n.kwargs), arg)
                vals[n] = n.target(*args, **kwargs)
    except Exception:   # _NotScalar, or torch refusing the values: lowered op by op
        return None
    out = vals[nodes[-1]]
    if not isinstance(out, torch.Tensor) or out.dtype != torch.int8 or out.numel() != 256:
        return None
    before = vals.get(nodes[-1].args[0])
    if isinstance(before, torch.Tensor) and before.is_floating_point() and torch.isnan(before).any():
        return None   # NaN before the final quantize has no int8 value: lowered op by op
    what = " > ".join(_packet(n) for n in nodes if _packet(n) not in QDQ)
    return out.reshape(256).numpy().copy(), what


class _NotScalar(Exception):
    pass
