"""PT2E quantization for the tests: the two quantizers users run, and the accuracy contract.

* `xnnpack`: torchao's XNNPACK-style symmetric quantizer (per-channel weights by default);
* `cortex_m`: ExecuTorch's CortexMQuantizer (it quantizes convolutions only for channels-last
  modules and inputs, so 4-D programs are converted to channels-last first).

The contract (docs/pytorch.md): the reference is the converted program's own eager output;
every output element within one output quantization step, and the same argmax for classifiers.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

QUANTIZERS = ("xnnpack", "cortex_m")


def _memoize_pattern_exports() -> None:
    """torchao's convert_pt2e, for any program with a BatchNorm left in it, exports 96 small
    conv-bn pattern functions with torch.export (0.5-1 s each) to look for QAT conv-bn pairs,
    and does it again for the next program. The export of a pattern depends only on the
    pattern's code, its closure and its inputs' shapes, so one export per key serves them all
    (a copy each time: the matcher must not see a graph another call changed). It takes a
    BatchNorm program's conversion from ~70 s to ~1 s; what convert_pt2e returns is unchanged."""
    import copy
    from torchao.quantization.pt2e import qat_utils

    export = qat_utils._get_aten_graph_module_for_pattern
    if getattr(export, "memoized", False):
        return
    cache: dict = {}

    def shape_of(v):
        return (tuple(v.shape), v.dtype, v.device.type) if isinstance(v, torch.Tensor) else v

    def memoized(pattern, example_inputs, is_cuda=False, **kwargs):
        fn = getattr(pattern, "fn", pattern)          # torchao wraps each in a WrapperModule
        try:
            key = (fn.__code__, tuple(c.cell_contents for c in fn.__closure__ or ()),
                   tuple(shape_of(v) for v in example_inputs), is_cuda,
                   tuple(sorted((k, shape_of(v)) for k, v in kwargs.items())))
            hash(key)
        except (AttributeError, TypeError, ValueError):
            return export(pattern, example_inputs, is_cuda, **kwargs)
        if key not in cache:
            cache[key] = export(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(cache[key])

    memoized.memoized = True
    qat_utils._get_aten_graph_module_for_pattern = memoized


def quantizer(name: str, per_channel: bool = True, weight_bits: int = 8):
    """weight_bits 4: the XNNPACK-style config with a 4-bit weight observer ([-8, 7])."""
    if name == "xnnpack":
        from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                              get_symmetric_quantization_config)
        bounds = dict(weight_qmin=-8, weight_qmax=7) if weight_bits == 4 else {}
        return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(
            is_per_channel=per_channel, **bounds))
    if name == "cortex_m":
        from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
        return CortexMQuantizer()
    raise ValueError(name)


def quantize(m: torch.nn.Module, x: torch.Tensor, name: str = "xnnpack", calib: int = 16,
             per_channel: bool = True, seed: int = 0, weight_bits: int = 8):
    """(converted module, example input): export, prepare_pt2e, calibrate on `calib` random
    inputs shaped like x (plus x itself), convert_pt2e."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    _memoize_pattern_exports()
    m = m.eval()
    if name == "cortex_m" and x.dim() == 4:
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    g = torch.Generator().manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(m, (x,))
        pm = prepare_pt2e(ep.module(check_guards=False), quantizer(name, per_channel, weight_bits))
        for _ in range(calib):
            pm(torch.randn(x.shape, generator=g))
        pm(x)
        return convert_pt2e(pm), x


def eager(cm, xs: np.ndarray) -> np.ndarray:
    """The converted program's own outputs, one inference per row of xs."""
    with torch.no_grad():
        return np.stack([cm(torch.tensor(x)).numpy() for x in xs])


def output_step(graph) -> float:
    """The quantization step of the program's (first) output: the scale its final DEQUANTIZE
    reads; 0.0 when the output is computed in float (a float island at the end)."""
    out = graph.outputs[0]
    for op in graph.ops:
        if out in op.outputs and op.kind == "DEQUANTIZE":
            return float(graph.t(op.inputs[0]).scale)
    return 0.0


def island_input_step(graph) -> float:
    """For a float island at the end of the program: the largest step of the int8 tensors it
    starts from (the scales its DEQUANTIZEs read). One step of rounding there reaches the
    output scaled by the island's slope, about 1 for the activations a program ends in."""
    producer = {o: op for op in graph.ops for o in op.outputs}
    steps, todo, seen = [], [graph.outputs[0]], set()
    while todo:
        tid = todo.pop()
        op = producer.get(tid)
        if tid in seen or op is None:
            continue
        seen.add(tid)
        if op.kind == "DEQUANTIZE":
            steps.append(float(graph.t(op.inputs[0]).scale))
        else:
            todo += [i for i in op.inputs if i is not None]
    return max(steps, default=0.0)


# aten ops that normalize by a spread measured at run time: one step of their int8 input
# (which the contract allows, and which earlier roundings put there) moves their output by the
# step over the spread, many output steps where a group's values nearly agree (a group norm
# of 2 channels x 3 samples took a one-step near-tie of a conv three layers up to 6 steps:
# tests/torch/test_difftest_found.py). Their inputs count as island entries whether or not the
# quantizer requantizes the norm's result.
NORMS = {"group_norm", "native_group_norm", "layer_norm", "native_layer_norm", "instance_norm",
         "rms_norm"}


def island_sensitivity(cm, xs: np.ndarray, trials: int = 3, seed: int = 0) -> float:
    """How far one step of int8 rounding where float islands start moves the converted
    program's output: the largest output change over `trials` runs in which every activation
    DEQUANTIZE feeding a float op (an island's entry) is moved by one step of its scale, up or
    down at random per element (and every one feeding a norm, NORMS). A layer norm over a
    nearly constant row divides such a step by the row's spread, so its island turns one step
    of its int8 input (which the contract allows) into many output steps; this measures that
    gain instead of assuming it is 1."""
    import torch.fx as fx
    qd = torch.ops.quantized_decomposed
    quant = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}
    deq = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor}

    def float_user(u) -> bool:   # an op on the dequantized value whose result is not requantized
        return u.op == "output" or (u.op == "call_function" and u.target not in quant and not any(
            w.op == "call_function" and w.target in quant for w in u.users))

    def norm_user(u) -> bool:    # a norm divides by its group's spread, requantized or not
        return u.op == "call_function" and getattr(u.target, "__name__", "").split(".")[0] in NORMS
    entries = {n for n in cm.graph.nodes if n.op == "call_function" and n.target in deq
               and isinstance(n.args[0], fx.Node) and n.args[0].op == "call_function"
               and n.args[0].target in quant and any(float_user(u) or norm_user(u) for u in n.users)}
    if not entries:
        return 0.0
    gen = torch.Generator().manual_seed(seed)

    class Nudged(fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if n in entries:
                scale = n.args[1]
                scale = float(self.env[scale] if isinstance(scale, fx.Node) else scale)
                sign = torch.randint(0, 2, v.shape, generator=gen).to(v.dtype) * 2 - 1
                v = v + sign * scale
            return v

    worst = 0.0
    with torch.no_grad():
        for _ in range(trials):
            for x in xs:
                t = torch.tensor(x)
                base, moved = cm(t), Nudged(cm).run(t)
                base = base[0] if isinstance(base, (tuple, list)) else base
                moved = moved[0] if isinstance(moved, (tuple, list)) else moved
                d = (moved - base).abs()
                worst = max(worst, float(d[torch.isfinite(d)].max()) if torch.isfinite(d).any() else 0.0)
    return worst


# aten ops whose output jumps where the input crosses a threshold: one step of their int8
# input near it (which the contract allows, and which earlier roundings put there) moves the
# output by the jump (hardshrink(x, 0.3) at an output step of 0.012: 25 steps; seed 20261130
# torch case 755, tests/torch/test_difftest_found.py).
JUMPS = {"hardshrink", "threshold", "sign", "heaviside", "round", "floor", "ceil"}
# unary functions whose slope can exceed one output step per input step (their result
# quantized finer than their input): one input step moves an element by its local slope
# (tanhshrink at an output scale 6x finer: 6 steps; seed 20261130 torch case 974)
STEEP = {"tanh", "sigmoid", "gelu", "silu", "elu", "softplus", "mish", "exp", "log", "sqrt",
         "rsqrt", "reciprocal", "erf", "log_sigmoid", "hardswish", "hardsigmoid"}


def jump_allowance(cm, xs: np.ndarray, seed: int = 0) -> np.ndarray | None:
    """Per output element, how far one step at the inputs of the program's discontinuous ops
    (JUMPS) and steep unary functions (STEEP) can move it in the converted program. An input element is a flip candidate where
    one step up or down changes its jump op's output by more than one step (it sits within a
    step of a threshold). Each candidate is flipped alone and its output change recorded; the
    allowance of an output element is the sum of those changes over all candidates (any
    combination of flips, as the layers after a jump mix them), at least the change of moving
    every such input (steep functions' too) up or down at once. Shaped like eager(cm, xs); None where the program has no
    such op. An element far from every threshold keeps an allowance of 0."""
    import torch.fx as fx
    qd = torch.ops.quantized_decomposed
    quant = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}
    deq = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor}

    def kind(u) -> str:
        return getattr(u.target, "__name__", "").split(".")[0] if u.op == "call_function" else ""
    acts = [n for n in cm.graph.nodes
            if n.op == "call_function" and n.target in deq and isinstance(n.args[0], fx.Node)
            and n.args[0].op == "call_function" and n.args[0].target in quant]
    entries = {n: [u for u in n.users if kind(u) in JUMPS] for n in acts}
    entries = {n: us for n, us in entries.items() if us}
    steep = [n for n in acts if any(kind(u) in STEEP for u in n.users)]
    if not entries and not steep:
        return None

    class Nudged(fx.Interpreter):
        """nudge: entry node -> signs (a tensor of -1 / 0 / +1 steps per element)."""
        def __init__(self, module, nudge):
            super().__init__(module)
            self.nudge, self.seen = nudge, {}

        def run_node(self, n):
            v = super().run_node(n)
            if n in self.nudge:
                scale = n.args[1]
                scale = float(self.env[scale] if isinstance(scale, fx.Node) else scale)
                v = v + self.nudge[n].to(v.dtype) * scale
            self.seen[n] = v
            return v

    def run(t, nudge):
        r = Nudged(cm, nudge)
        v = r.run(t)
        return (v[0] if isinstance(v, (tuple, list)) else v).numpy().astype(np.float64), r.seen

    def finite(d):
        return np.where(np.isfinite(d), d, 0.0)
    out = []
    with torch.no_grad():
        for x in xs:
            t = torch.tensor(x)
            base, seen = run(t, {})
            allow, flipped = np.zeros_like(base), np.zeros_like(base)
            for sign in (1.0, -1.0):
                moved, mseen = run(t, {n: torch.full_like(seen[n], sign) for n in [*entries, *steep]})
                allow = np.maximum(allow, finite(np.abs(moved - base)))
                for n, users in entries.items():
                    scale = n.args[1]
                    scale = float(seen[scale] if isinstance(scale, fx.Node) else scale)
                    flips = torch.zeros_like(seen[n], dtype=torch.bool)
                    for u in users:
                        flips |= (mseen[u] - seen[u]).abs() > 1.5 * scale
                    for idx in torch.nonzero(flips).tolist():
                        one = torch.zeros_like(seen[n])
                        one[tuple(idx)] = sign
                        moved1, _ = run(t, {n: one})
                        flipped += finite(np.abs(moved1 - base))
            out.append(np.maximum(allow, flipped))
    return np.stack(out)


def assert_contract(got: np.ndarray, ref: np.ndarray, step: float, classifier: bool = False,
                    max_steps: int = 1) -> float:
    """Every element within one output step (`max_steps` where a documented compounding allows
    more: see COMPOUNDING in test_pt2e_zoo.py); float outputs within 1e-5 relative. The same
    argmax where eager's top two differ by more than two steps. Returns the fraction of
    elements exactly equal."""
    got = got.reshape(ref.shape).astype(np.float64)
    ref = ref.astype(np.float64)
    if step:
        # In units of the step; the outputs are float32 multiples of it, exact to ~1e-5 steps.
        err = np.abs(got - ref) / step
        assert err.max() <= max_steps + 1e-3, (
            f"off by {err.max():.3f} steps (step {step:g}; allowed {max_steps}) at "
            f"{np.unravel_index(err.argmax(), err.shape)}")
    else:
        err = np.abs(got - ref)
        assert err.max() <= 1e-5 * max(1.0, float(np.abs(ref).max())), f"off by {err.max():g}"
    if classifier:
        flat_g, flat_r = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
        top2 = np.sort(flat_r, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 2 * max(step, 1e-6)
        assert clear.any(), "no input with a clear winner: the argmax check would test nothing"
        assert np.array_equal(flat_g.argmax(1)[clear], flat_r.argmax(1)[clear])
    return float(np.mean(got == ref))


def smooth_inputs(shape, n: int, seed: int = 0) -> np.ndarray:
    """Real-looking inputs: low-frequency fields (an image's or a spectrogram's smoothness)
    rather than white noise, n of them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal(shape)
        for ax in range(2, len(shape)):   # a running average along each spatial axis
            k = max(1, shape[ax] // 4)
            x = np.apply_along_axis(lambda v: np.convolve(v, np.ones(k) / k, mode="same"), ax, x)
        out.append((x / (x.std() + 1e-9)).astype(np.float32))
    return np.stack(out)


def random_inputs(shape, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)
