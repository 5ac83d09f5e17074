"""`eerie-c validate`'s inputs: read them from a .npy / .npz file or a directory of .npy files,
match them to the model's inputs (shape and dtype, with a leading dimension of N inferences),
or make N random ones of the right dtype and range; read the labels. Every problem is one
EerieError line naming what was given and what the model wants."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EerieError
from .ir import DTYPE_NP


def load_array_file(path, kind: str = ".npy / .npz"):
    """np.load without pickles; a missing or malformed file is a one-line EerieError (also
    `eerie-c run --input`'s loader)."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise EerieError(f"{path}: no such file") from None
    except Exception as e:
        raise EerieError(f"{path}: not a valid {kind} file ({type(e).__name__}: {e})") from None


def read_inputs(path) -> list[tuple[str, np.ndarray]]:
    """(key, array) pairs in file order: a .npz's arrays under their keys, a .npy's one array,
    or for a directory one pair whose value is the list of its *.npy files and arrays in name
    order, each one inference or a batch of them (one input only; match_inputs joins them)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.npy"))
        if not files:
            raise EerieError(f"{p}: the directory holds no .npy files")
        return [("", [(f, load_array_file(f)) for f in files])]   # batched by match_inputs
    if not p.exists():
        raise EerieError(f"{p}: no such file")
    data = load_array_file(p)
    if isinstance(data, np.ndarray):
        return [("", data)]
    with data:
        if not data.files:
            raise EerieError(f"{p}: the .npz file holds no arrays")
        return [(k, data[k]) for k in data.files]


def _batched(a: np.ndarray, shape: tuple, dtype, what: str, want: str) -> np.ndarray:
    """`a` as [N, ...shape]: one inference of exactly `shape`, or already a batch of them."""
    if a.dtype != dtype:
        raise EerieError(f"{what}: dtype {a.dtype}, but the model's {want} is {dtype} {list(shape)}")
    if tuple(a.shape) == shape:
        return a[None]
    if a.ndim == len(shape) + 1 and tuple(a.shape[1:]) == shape:
        return a
    raise EerieError(f"{what}: shape {list(a.shape)}, but the model's {want} is {list(shape)} "
                     f"(or [N, {', '.join(map(str, shape))}] for N inferences)")


def match_inputs(specs: list[dict], given: list[tuple[str, np.ndarray]], source: str) -> list[np.ndarray]:
    """The arrays in the order of the model's inputs (`specs`: report["inputs"]), batched. A
    .npz's keys are the inputs' names, or arr_0, arr_1, ... in the inputs' order (what
    np.savez writes for arrays given without names); a .npy or a directory: one input."""
    names = [s.get("name") or "" for s in specs]
    if not given:
        raise EerieError(f"{source}: no arrays, but the model has {len(specs)} input(s) {names}")
    keys = [k for k, _ in given]
    by_key = dict(given)
    if keys[0]:   # a .npz, or a dict
        if all(n and n in by_key for n in names) and len(keys) == len(names):
            given = [(n, by_key[n]) for n in names]
        elif keys == [f"arr_{k}" for k in range(len(specs))]:
            pass
        else:
            raise EerieError(f"{source}: arrays {keys} do not match the model's input(s) {names} "
                             f"(name each array after an input, or save them unnamed in order: "
                             f"arr_0, arr_1, ...)")
    elif len(given) != len(specs):
        raise EerieError(f"{source}: {len(given)} array(s), but the model has {len(specs)} input(s) "
                         f"{names} (use a .npz with one array per input)")
    out = []
    for k, (spec, (key, a)) in enumerate(zip(specs, given)):
        shape, dtype = tuple(spec["shape"]), np.dtype(DTYPE_NP[spec["dtype"]])
        what = f"{source}" + (f"[{key!r}]" if key else "")
        want = f"input {k} {names[k]!r}" if names[k] else f"input {k}"
        if isinstance(a, list):   # a directory's files, in name order
            a = np.concatenate([_batched(x, shape, dtype, str(f), want) for f, x in a])
        else:
            a = _batched(a, shape, dtype, what, want)
        out.append(np.ascontiguousarray(a))
    counts = {len(a) for a in out}
    if len(counts) > 1:
        raise EerieError(f"{source}: the arrays hold different numbers of inferences {sorted(counts)}")
    if out[0].shape[0] == 0:
        raise EerieError(f"{source}: zero inferences (first dimension is 0)")
    return out


def random_inputs(specs: list[dict], ranges: list[tuple[float, float] | None], count: int,
                  seed: int) -> list[np.ndarray]:
    """`count` random inferences: integers over their dtype's whole range; float inputs
    uniform over `ranges[k]` (a quantized program's input: what its QUANTIZE can represent),
    else standard normal."""
    if count < 1:
        raise EerieError(f"--count {count}: need at least one input")
    rng = np.random.default_rng(seed)
    out = []
    for spec, span in zip(specs, ranges):
        shape, dtype = (count, *spec["shape"]), np.dtype(DTYPE_NP[spec["dtype"]])
        if dtype == np.bool_:
            a = rng.integers(0, 2, size=shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            lo, hi = (max(info.min, -1000), min(info.max, 1000)) if dtype.itemsize > 2 else (info.min, info.max)
            a = rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype)
        elif span is not None:
            a = rng.uniform(span[0], span[1], size=shape).astype(dtype)
        else:
            a = rng.standard_normal(size=shape).astype(dtype)
        out.append(a)
    return out


def read_labels(path, count: int) -> np.ndarray:
    """One integer class per inference (shape [N]); a one-hot [N, classes] array also works."""
    a = load_array_file(Path(path))
    if not isinstance(a, np.ndarray):
        raise EerieError(f"{path}: labels must be a .npy file, not a .npz")
    if a.ndim == 2 and a.shape[1] > 1:
        a = a.argmax(1)
    if a.ndim != 1 or not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise EerieError(f"{path}: labels of dtype {a.dtype} shape {list(a.shape)}; want one integer "
                         f"class per input, shape [{count}]")
    if len(a) != count:
        raise EerieError(f"{path}: {len(a)} labels for {count} inputs")
    return a.astype(np.int64)
