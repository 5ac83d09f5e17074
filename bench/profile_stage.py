#!/usr/bin/env python3
"""Where a row-band patch stage's instructions go: per layer of the stage, the instructions
its kernels run over all the steps' rows and those of its kept-row moves (cached halos),
measured in QEMU (-icount shift=0, SysTick), beside the planner's estimate of the same
(eerie_c/estimate.py: each call's layer estimate, the moves, the per-call step) and the
layer measured layer by layer (bench/profile_layers.py). bench/fit_patch_cost.py
--cached-layers fits the cached stages' costs from these numbers.

The probe reads the counter three times per layer and step (before the move, before the
kernel, after it); a read costs a few dozen instructions, which this subtracts: the segment
from one layer's kernel end to the next layer's start holds nothing but the probe, so its
mean is the probe's cost. SysTick ticks every 40 instructions on the M4 (31.25 on the M55):
each segment is off by up to one tick, which averages out over a stage's many segments.

    python bench/profile_stage.py person_detect --board mps2-an386 --patch 8:48:cached
    python bench/profile_stage.py vww_96_int8 --patch 8:48:cached:low=1,5
    python bench/profile_stage.py vww_96_int8 --patch auto
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from eerie_c.pipeline import compile_model  # noqa: E402
from eerie_c.toolchain.arch import arch_of  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402
from eerie_c.toolchain.firmware import INPUTS_FILE, build_firmware, pack_records  # noqa: E402
from eerie_c.toolchain.qemu import run_qemu  # noqa: E402

PROBE = """
#include "runtime/eerie_rt.h"
uint64_t eerie_stage_ticks[%(n)d];
uint32_t eerie_stage_segs[%(n)d];
static uint64_t eerie_stage_last;
static unsigned eerie_stage_cur = %(idle)du;
static void eerie_stage_mark(unsigned next)
{
    const uint64_t now = eerie_counter_ticks();
    eerie_stage_ticks[eerie_stage_cur] += now - eerie_stage_last;
    eerie_stage_segs[eerie_stage_cur] += 1u;
    eerie_stage_cur = next;
    eerie_stage_last = now;
}
"""

REPORT = """
    {
        extern uint64_t eerie_stage_ticks[];
        extern uint32_t eerie_stage_segs[];
        unsigned i;
        for (i = 0; i < %(n)du; ++i) {
            eerie_put_kv("seg", eerie_stage_segs[i]);
            eerie_put_kv("ticks", eerie_ticks_to_instructions(eerie_stage_ticks[i]));
        }
    }
"""


def instrument(src: str) -> tuple[str, int]:
    """The model C with a mark before each layer's move, before its kernel switch and after
    it (buckets 3k, 3k+1, 3k+2), and the number of layers."""
    lines = src.splitlines()
    out, k, indent, phase = [], None, "", 0
    layers = 0
    for ln in lines:
        m = re.match(r"^(\s*)\{   /\* layer (\d+): .* over the band's rows \*/$", ln)
        if m:
            k, indent, phase = int(m.group(2)), m.group(1), 1
            layers = max(layers, k + 1)
            out += [ln, f"{indent}    eerie_stage_mark({3 * k}u);"]
            continue
        if k is not None and phase == 1 and re.match(r"^\s*const int8_t \*const in[01] = ", ln):
            out += [f"{indent}    eerie_stage_mark({3 * k + 1}u);", ln]
            phase = 2
            continue
        out.append(ln)
        if k is not None and phase == 2 and ln == f"{indent}    default:":
            phase = 3
        elif k is not None and phase == 3 and ln == f"{indent}    }}":   # the switch's end
            out.append(f"{indent}    eerie_stage_mark({3 * k + 2}u);")
            k, phase = None, 0
    if layers == 0:
        raise SystemExit("profile_stage: no row-band patch stage in the model C")
    return "\n".join(out) + "\n", layers


def parse_patch(text: str):
    """auto, or LAYERS:STEPS[:cached][:low=K,K]: a forced row-band stage (low: those layers'
    low-scratch depthwise)."""
    if text == "auto":
        return "auto", frozenset()
    parts = text.split(":")
    forced = (int(parts[0]), (int(parts[1]), 1)) + (("cached",) if "cached" in parts else ())
    low = next((p[4:] for p in parts if p.startswith("low=")), "")
    return forced, frozenset(int(v) for v in low.split(",") if v)


def _forcing_low(low: frozenset):
    """patch/choice.py make_cached_plan wrapped so that a forced stage runs `low`'s layers
    on their low-scratch kernel (the planner only switches them in --patch auto)."""
    from eerie_c.patch import choice as patch_choice
    orig = patch_choice.make_cached_plan

    def make(*a, **kw):
        plan = orig(*a, **kw)
        return plan if plan is None or not low else dataclasses.replace(plan, low_scratch=low)
    return patch_choice, orig, make


def measure(path: Path, board, patch, low=frozenset(), input_mode="whole",
            max_recompute: float = 20.0) -> dict:
    """Per layer of the stage: kernel and move instructions measured, calls, and the stage."""
    mod, orig, make = _forcing_low(low)
    mod.make_cached_plan = make
    try:
        with tempfile.TemporaryDirectory(prefix="eerie-stage-") as tmp:
            out = Path(tmp) / "fw"
            res = compile_model(path, out_dir=out, board=board.name, name="m", patch=patch,
                                max_recompute=max_recompute, input_mode=input_mode)
            src, n = instrument((out / "m.c").read_text())
            marker = "/* ---- layers ---- */"
            (out / "m.c").write_text(src.replace(marker, PROBE % {"n": 3 * n + 1, "idle": 3 * n} + marker))
            main_c = (out / "main.c").read_text()
            main_c, hits = re.subn(r"(ticks = eerie_counter_ticks\(\) - start;)",
                                   lambda m: m.group(1) + REPORT % {"n": 3 * n + 1}, main_c, count=1)
            if not hits:
                raise SystemExit("profile_stage: main.c has no tick count to report after")
            (out / "main.c").write_text(main_c)
            spec = res.report["inputs"][0]
            x = np.random.default_rng(0).integers(-128, 128, size=(1, *spec["shape"]), dtype=np.int8)
            (out / INPUTS_FILE).write_bytes(pack_records([x]))
            elf = build_firmware(out, "m", arch=arch_of(board))
            run = run_qemu(board, elf, out)
    finally:
        mod.make_cached_plan = orig
    segs = [int(v) for v in re.findall(r"eerie: seg (\d+)", run.stdout)]
    ticks = [int(v) for v in re.findall(r"eerie: ticks (\d+)", run.stdout)]
    stage = next(op for op in res.graph.ops if op.kind == "PATCH_STAGE").attrs["patch"]
    # the probe's own cost per segment: the segments between a kernel's end and the next
    # layer's start run nothing else (the last layer's also holds the loop's step)
    probe = float(np.median([ticks[3 * k + 2] / max(segs[3 * k + 2], 1) for k in range(n - 1)]))
    per = []
    for k in range(n):
        move = ticks[3 * k] - probe * segs[3 * k]
        kern = ticks[3 * k + 1] - probe * segs[3 * k + 1]
        per.append({"move": move, "kernel": kern,
                    "calls": sum(1 for t in stage.tiles if t[k][2] > 0)})
    return {"stage": stage, "layers": per, "probe": probe, "report": res.report,
            "instructions": res.report.get("instructions")}


def estimates(stage, board) -> list[dict]:
    """Per layer: the estimate of its kernels over the stage's steps (estimate.py band_work's
    terms, without the per-call step), of its moves, and of the layer whole."""
    from eerie_c.estimate import DW_HALO, FAMILY, MOVE_COST, estimate_layer, layer_band_work
    fam = FAMILY[board.cpu]
    per_byte, per_move = MOVE_COST.get(fam, MOVE_COST["dsp"])
    out = []
    for k, lay in enumerate(stage.layers):
        kern = 0
        for kind, m, o, i, *rest in layer_band_work(stage, k):
            share, halo = rest if rest else (1.0, 0)
            kern += estimate_layer(kind, m, i, o, False, board.cpu, share) + DW_HALO.get(fam, 0) * halo
        moved = [b for band in (stage.cache.moves if stage.cache else []) for kk, (_, b) in
                 enumerate(band) if kk == k and b]
        whole = estimate_layer(lay.kind, lay.out_h * lay.out_w * lay.macs_per_pixel,
                               lay.in_h * lay.in_w * lay.in_c, lay.out_h * lay.out_w * lay.out_c,
                               False, board.cpu)
        out.append({"kernel": round(kern), "move": sum(b * per_byte + per_move for b in moved),
                    "bytes": sum(moved), "moves": len(moved), "whole": whole,
                    "halo": sum(c[5] for c in layer_band_work(stage, k) if len(c) > 5)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", help="a .tflite path, a shared model's stem or person_detect")
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--patch", default="auto", help="auto or LAYERS:STEPS[:cached][:low=K,K]")
    ap.add_argument("--input-rows", action="store_true")
    a = ap.parse_args(argv)
    board = get_board(a.board)
    if a.model == "person_detect":
        from compare_patches import person_detector
        path = person_detector(Path(tempfile.mkdtemp(prefix="eerie-pd-")))
    else:
        path = Path(a.model) if a.model.endswith(".tflite") else REPO / "models" / "mlperf_tiny" / f"{a.model}.tflite"
    patch, low = parse_patch(a.patch)
    import profile_layers
    profile_layers.PATCH = "off"
    _, whole, _ = profile_layers.measure(path, board)
    got = measure(path, board, patch, low, "rows" if a.input_rows else "whole")
    st = got["stage"]
    est = estimates(st, board)
    print(f"{path.stem} on {board.name}: stage of {len(st.layers)} layers, {len(st.tiles)} steps, "
          f"{'cached' if st.cache else 'recomputed'} halos, low-scratch {sorted(st.low_scratch)}; "
          f"probe {got['probe']:.0f} instructions per segment")
    print("| layer | kind | calls | kernels measured | estimated | ratio | layer by layer measured | "
          "estimated | moves measured | bytes | estimated |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k, (lay, m, e) in enumerate(zip(st.layers, got["layers"], est)):
        kind = lay.kind + ("_LOW" if k in st.low_scratch else "")
        print(f"| {k} | {kind} {lay.kh}x{lay.kw}/{lay.sh} {lay.in_c}->{lay.out_c} | {m['calls']} | "
              f"{m['kernel']:,.0f} | {e['kernel']:,} | {e['kernel'] / max(m['kernel'], 1):.2f} | "
              f"{whole[k]:,} | {e['whole']:,} | {m['move']:,.0f} | {e['bytes']:,} | {e['move']:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
