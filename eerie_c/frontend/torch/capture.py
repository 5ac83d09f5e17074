"""Capture: an `nn.Module`, `torch.export.ExportedProgram` or `.pt2` file -> the IR.

Exports the program (`torch.export.export`), decomposes it to the Core ATen opset with
`run_decompositions()` (keeping the ops the int8 path wants whole), loads `.pt2` files, and
hands the FX graph to the walker (walker.py). A dynamic leading dimension is first tried as a
per-sample graph (batch.py) and otherwise compiled as a masked dimension (dynamic.py).
"""
from __future__ import annotations

from ...errors import EerieError
from ...ir import Graph
from ..tensor_checks import shape_problem
from .batch import _PerSampleError
from .quiet import describe, quiet_torch
from .values import _torch
from .walker import Lowerer

DEFAULT_MAX_ITERATIONS = 1000


def export_program(model, example_args=None, dynamic_shapes=None):
    """An ExportedProgram from a module (exported here) or an ExportedProgram (as is)."""
    torch = _torch()
    if isinstance(model, torch.export.ExportedProgram):
        # It was traced with its own inputs and shapes: arguments for a new export would be
        # silently ignored, so they are refused.
        if example_args is not None or dynamic_shapes is not None:
            raise EerieError("an ExportedProgram keeps the example inputs and dynamic shapes it was "
                             "exported with: pass example_args / dynamic_shapes only with an nn.Module "
                             "(or export again with the new ones)")
        return model
    if isinstance(model, torch.nn.Module):
        if example_args is None:
            raise EerieError("compiling an nn.Module needs example_args (a tuple of example inputs)")
        if not isinstance(example_args, tuple):
            example_args = tuple(example_args) if isinstance(example_args, list) else (example_args,)
        if not isinstance(model, torch.fx.GraphModule):   # a convert_pt2e module refuses .eval()
            model = model.eval()
        try:
            return torch.export.export(model, example_args, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            msg = " ".join(str(e).split())[:400]
            raise EerieError(f"torch.export could not capture {type(model).__name__}: "
                             f"{type(e).__name__}: {msg} (run `eerie_c.check(module, example_args)` "
                             f"for the lines to change)") from None
    raise EerieError(f"cannot compile a {type(model).__name__}: expected an nn.Module, an "
                     f"ExportedProgram, or a .tflite / .pt2 path")


def load_torch(model, example_args=None, name: str = "model",
               max_iterations: int = DEFAULT_MAX_ITERATIONS, dynamic_shapes=None) -> Graph:
    ep = export_program(model, example_args, dynamic_shapes)
    check_inputs(ep)
    with quiet_torch():
        try:
            ep = ep.run_decompositions(_decompositions())
        except Exception as e:
            raise EerieError(f"torch decomposition to the Core ATen opset failed: {describe(e)}") from None
    names = _dim_names(ep, dynamic_shapes)
    try:
        return Lowerer(ep, name, max_iterations, dim_names=names).run()
    except _PerSampleError as first:
        # A dynamic dim 0 that ops combine along (softmax over it, a mean over it) is not a
        # per-sample batch: compile it as any other dynamic dim (masked at the maximum size).
        try:
            return Lowerer(ep, name, max_iterations, dim_names=names, batch_as_dim=True).run()
        except EerieError:
            raise first from None


# Ops kept whole instead of decomposed to the Core ATen opset: each has a kernel of its own
# (HARD_SWISH, int8 included), where its decomposition (x * relu6(x + 3) / 6) would leave a
# quantized program four float ops with no quantization between them. nearest-exact
# upsampling is a RESIZE_NEAREST_NEIGHBOR (torch_lower_resize.py), not a two-tensor index;
# bicubic has no kernel: kept whole, its error names it rather than an index it became.
KEEP_WHOLE = ("hardswish", "_upsample_nearest_exact2d", "upsample_bicubic2d")


def _decompositions():
    torch = _torch()
    table = torch.export.default_decompositions()
    for name in KEEP_WHOLE:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():   # .default and .vec alike
            table.pop(getattr(packet, overload), None)
    return table


def register_quantized_ops() -> None:
    """PT2E's quantize / dequantize ops (torch.ops.quantized_decomposed.*) exist once torch's
    module defining them is imported; a .pt2 file of a quantized program needs them to load."""
    try:
        import torch.ao.quantization.fx._decomposed  # noqa: F401
    except ImportError:   # pragma: no cover - a torch without them cannot have made such a file
        pass


def check_inputs(ep) -> None:
    """The IR's limits on the program's inputs, before torch traces anything with them: the
    sizes in a .pt2 file are whatever its JSON says (a [1, 2**33] input once reached the C
    proof as a CompilerBug)."""
    torch = _torch()
    for node in ep.graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        shape = [d for d in val.shape if isinstance(d, int)]   # dynamic sizes: checked later
        problem = shape_problem(shape, "shape", val.element_size(), allow_zero=False)
        if problem:
            raise EerieError(f"input {node.name}: {problem}")


def _dim_names(ep, dynamic_shapes) -> dict:
    """{sympy symbol: torch.export.Dim name}: from the dynamic_shapes the program was exported
    with here, else from the program's shape environment, which keeps each Dim's name for the
    input size it was given to (an ExportedProgram made by the user). A .pt2 file keeps
    neither: its parameters are named size0, size1, ..."""
    out = {}
    sig = ep.graph_signature
    users = list(sig.user_inputs)
    vals = {n.name: n.meta.get("val") for n in ep.graph_module.graph.nodes if n.op == "placeholder"}
    for k, spec in enumerate(dynamic_shapes if isinstance(dynamic_shapes, (list, tuple)) else []):
        if k >= len(users) or not isinstance(spec, dict):
            continue
        val = vals.get(users[k])
        for d, dim in spec.items():
            try:
                size = val.shape[d]
            except Exception:
                continue
            if not isinstance(size, int) and getattr(size.node.expr, "is_Symbol", False):
                out.setdefault(size.node.expr, getattr(dim, "__name__", "") or "")
    for u in users:
        for size in getattr(vals.get(u), "shape", ()):
            expr = getattr(getattr(size, "node", None), "expr", None)
            if getattr(expr, "is_Symbol", False) and expr not in out:
                name = _debug_name(size.node, expr)
                if name:
                    out[expr] = name
    return out


def _debug_name(node, expr) -> str:
    """The Dim name torch's ShapeEnv recorded for a size symbol ('' if none)."""
    env = getattr(node, "shape_env", None)
    names = getattr(env, "source_name_to_debug_name", None) or {}
    for src in (getattr(env, "var_to_sources", None) or {}).get(expr, []):
        n = src.name() if callable(src.name) else src.name
        if names.get(n):
            return names[n]
    return ""


def load_pt2(path, name: str = "model", max_iterations: int | None = None) -> Graph:
    """A program saved with torch.export.save. max_iterations None: DEFAULT_MAX_ITERATIONS."""
    if max_iterations is None:
        max_iterations = DEFAULT_MAX_ITERATIONS
    torch = _torch()
    register_quantized_ops()
    with quiet_torch() as said:
        try:
            ep = torch.export.load(str(path))
        except Exception as e:
            # torch.export.load logs the real error and raises a generic one ("check the
            # warnings above", which quiet_torch kept from the terminal): name the real one.
            real = said.last_exception()
            if real is None and "warnings above" in str(e):   # nothing logged: no program inside
                detail = "the archive holds no exported program: no models/*.json"
            else:
                detail = describe(real or e)
            raise EerieError(f"{path}: not a program saved by torch.export.save ({detail})") from None
    return load_torch(ep, None, name, max_iterations)
