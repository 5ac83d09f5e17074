"""`eerie-c validate`'s numbers: per output, how the compiled model's outputs compare with the
reference's (error metrics, top-1 agreement, accuracy against labels) and whether every input
is within the accuracy contract. Pure numpy; validation.py runs the models.

The contracts (README, "Validate a compiled model"):
- "exact": integer outputs of a TFLite model (TFLM's reference kernels) and integer outputs of
  a .pt2 program: bit for bit;
- "float": float outputs of a TFLite model: per element |got - ref| <= 1e-5 |ref| + 1e-7 M
  (M = the inference's max |ref|, never more than 1e-5 M), NaN where the reference has NaN;
- "absolute": float outputs of a float .pt2 program: |got - ref| <= 1e-5 max(1, M);
- "steps": the float outputs of a PT2E int8 program: within one output quantization step of
  the converted program's eager output (docs/pytorch.md, "Accuracy contract").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

FLOAT_RTOL = 1e-5          # float outputs: relative to each element (and the floor below)
FLOAT_FLOOR = 1e-2         # x FLOAT_RTOL x max|ref|: the absolute floor near zero
TORCH_ATOL = 1e-5          # float .pt2 programs: x max(1, max|ref|)
STEP_SLACK = 1e-3          # PT2E outputs are float32 multiples of the step, exact to ~1e-5 steps


@dataclass
class Contract:
    kind: str              # "exact", "float", "absolute" or "steps"
    step: float = 0.0      # "steps": the output's quantization step

    def text(self) -> str:
        return {"exact": "bit-exact",
                "float": f"|err| <= {FLOAT_RTOL:g} |ref| + {FLOAT_RTOL * FLOAT_FLOOR:g} max|ref|",
                "absolute": f"|err| <= {TORCH_ATOL:g} max(1, max|ref|)",
                "steps": f"|err| <= 1 output step ({self.step:.6g})"}[self.kind]

    def within(self, got: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Per inference (leading dimension): is every element within the contract?"""
        n = len(ref)
        g = np.asarray(got).reshape(n, -1)
        r = np.asarray(ref).reshape(n, -1)
        if self.kind == "exact" or r.shape[1] == 0:
            return np.array([np.array_equal(a, b) for a, b in zip(g, r)], bool)
        g, r = g.astype(np.float64), r.astype(np.float64)
        nan_ok = np.all(np.isnan(g) == np.isnan(r), axis=1)
        g, r = np.where(np.isnan(g), 0.0, g), np.where(np.isnan(r), 0.0, r)
        with np.errstate(invalid="ignore"):            # inf - inf
            err = np.where(g == r, 0.0, np.abs(g - r))
        finite = np.isfinite(r)
        m = np.max(np.where(finite, np.abs(r), 0.0), axis=1, keepdims=True)
        if self.kind == "float":
            tol = np.minimum(FLOAT_RTOL * np.abs(np.where(finite, r, 0.0)) + FLOAT_RTOL * FLOAT_FLOOR * m,
                             FLOAT_RTOL * m)
        elif self.kind == "absolute":
            tol = TORCH_ATOL * np.maximum(1.0, m) + 0.0 * r
        else:
            tol = self.step * (1 + STEP_SLACK) + 0.0 * r
        tol = np.where(finite, tol, 0.0)               # an infinity must be met exactly
        return nan_ok & np.all(err <= tol, axis=1)


@dataclass
class OutputStats:
    """One output's comparison over all inputs; errors in the output's own units (quantization
    steps for an integer output), cosine similarity of the values less their zero point."""
    index: int
    name: str
    dtype: str
    shape: list
    contract: str
    compared: int
    within: int                 # inferences whose every element is within the contract
    bit_exact: int              # inferences whose output equals the reference bit for bit
    bit_exact_elements: float   # fraction of all elements bit-exact
    max_abs_error: float
    mean_abs_error: float
    rmse: float
    cosine: float
    top1_agreement: float | None = None        # classifiers (last dimension > 1)
    accuracy: float | None = None              # with labels: the compiled model's ...
    reference_accuracy: float | None = None    # ... and the reference's

    @property
    def ok(self) -> bool:
        return self.within == self.compared

    def to_json(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def compare_output(k: int, spec: dict, got: np.ndarray, ref: np.ndarray, contract: Contract,
                   labels: np.ndarray | None = None) -> OutputStats:
    """The statistics of output k (`spec`: its report entry) over the batched outputs."""
    n = len(ref)
    got = np.asarray(got).reshape(ref.shape)
    zp = float(spec.get("zero_point") or 0) if np.issubdtype(ref.dtype, np.integer) else 0.0
    g, r = got.astype(np.float64), ref.astype(np.float64)
    same = np.array([np.array_equal(a, b, equal_nan=r.dtype.kind == "f")
                     for a, b in zip(got.reshape(n, -1), ref.reshape(n, -1))], bool)
    finite = np.isfinite(g) & np.isfinite(r)
    err = np.abs(g - r)[finite] if finite.any() else np.zeros(1)
    gz, rz = np.where(finite, g - zp, 0.0).ravel(), np.where(finite, r - zp, 0.0).ravel()
    norms = float(np.linalg.norm(gz) * np.linalg.norm(rz))
    cosine = float(gz @ rz / norms) if norms > 0 else float(np.array_equal(gz, rz))
    st = OutputStats(
        index=k, name=spec.get("name") or f"output {k}", dtype=str(ref.dtype),
        shape=list(spec.get("shape", ref.shape[1:])), contract=contract.text(), compared=n,
        within=int(contract.within(got, ref).sum()), bit_exact=int(same.sum()),
        bit_exact_elements=float(np.mean(got == ref)) if ref.size else 1.0,
        max_abs_error=float(err.max(initial=0.0)), mean_abs_error=float(err.mean()) if err.size else 0.0,
        rmse=float(np.sqrt(np.mean(err ** 2))) if err.size else 0.0, cosine=cosine)
    if ref.ndim >= 2 and ref.shape[-1] > 1:
        st.top1_agreement = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
        if labels is not None and is_single_classifier(ref):
            st.accuracy = float(np.mean(got.reshape(n, -1).argmax(1) == labels))
            st.reference_accuracy = float(np.mean(ref.reshape(n, -1).argmax(1) == labels))
    return st


def is_single_classifier(batched: np.ndarray) -> bool:
    """One class decision per inference: the last dimension > 1, every other one 1."""
    shape = batched.shape[1:]
    return len(shape) >= 1 and shape[-1] > 1 and int(np.prod(shape[:-1], dtype=np.int64)) == 1


def _num(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def stat_rows(st: OutputStats) -> list[tuple[str, str]]:
    rows = [("inputs compared", str(st.compared)),
            ("within contract", f"{st.within} / {st.compared}  ({st.contract})"),
            ("bit-exact", f"{st.bit_exact} / {st.compared}  ({_pct(st.bit_exact_elements)} of elements)"),
            ("max abs error", _num(st.max_abs_error)),
            ("mean abs error", f"{st.mean_abs_error:.4g}"),
            ("RMSE", f"{st.rmse:.4g}"),
            ("cosine similarity", f"{st.cosine:.6f}")]
    if st.top1_agreement is not None:
        rows.append(("top-1 agreement", _pct(st.top1_agreement)))
    if st.accuracy is not None:
        rows.append(("accuracy (labels)", f"compiled {_pct(st.accuracy)}, reference {_pct(st.reference_accuracy)}"))
    return rows


def _title(st: OutputStats) -> str:
    return f"output {st.index} {st.name!r} {st.dtype} {st.shape}: " + ("OK" if st.ok else "OUTSIDE THE CONTRACT")


def stats_text(stats: list[OutputStats]) -> str:
    lines = []
    for st in stats:
        rows = stat_rows(st)
        w = max(len(a) for a, _ in rows)
        lines.append(_title(st))
        lines += [f"  {a.ljust(w)}  {b}" for a, b in rows]
    return "\n".join(lines)


def stats_markdown(stats: list[OutputStats]) -> str:
    lines = []
    for st in stats:
        lines += ["", f"**{_title(st)}**", "", "| metric | value |", "|---|---|"]
        lines += [f"| {a} | {b.replace('|', chr(92) + '|')} |" for a, b in stat_rows(st)]
    return "\n".join(lines)
