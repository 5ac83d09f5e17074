#!/usr/bin/env python3
"""Data-dependent control flow from PyTorch on an emulated Cortex-M board.

A small nn.Module with both of torch's structured control-flow operators:

- torch.while_loop refines a hidden state by a damped fixed-point iteration until it settles
  (change below 1e-3) or 30 steps have run: inputs take different numbers of steps;
- torch.cond is an early exit: if the small head is confident (top probability > 0.6) its
  answer is returned, otherwise a larger head runs.

eerie-c turns them into a bounded C `for` loop and an `if`/`else` inside NAME_invoke (no
interpreter, static memory). This script compiles the module with eerie_c.run for a board,
runs a few inputs in QEMU (one boot), compares the outputs with the module's own (float32,
max abs difference 1e-5), and prints per input the branch taken, the loop's step
count and the instructions the inference took: the early exit and short loops are cheaper.

    python examples/torch_cond/run.py [--board mps2-an386] [--out build/torch_cond]

Needs eerie-c with torch (pip install . and torch; .ci/setup installs both), plus
arm-none-eabi-gcc with newlib, make and qemu-system-arm.
"""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
try:
    import eerie_c
except ImportError:      # run from a source checkout without `pip install .`
    sys.path.insert(0, str(HERE.parents[1]))
    import eerie_c

FEATURES, HIDDEN, CLASSES = 16, 16, 4
MAX_STEPS, TOLERANCE, CONFIDENT = 30, 1e-3, 0.6


class AdaptiveClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(FEATURES, HIDDEN)
        self.mix = nn.Linear(HIDDEN, HIDDEN)
        self.small = nn.Linear(HIDDEN, CLASSES)
        self.big1 = nn.Linear(HIDDEN, 32)
        self.big2 = nn.Linear(32, CLASSES)
        # Larger weights than the default: the small head is sure of itself on some inputs.
        nn.init.normal_(self.small.weight, std=0.8)

    def hidden(self, x):
        """The settled hidden state and the number of loop steps it took."""
        h0 = torch.tanh(self.embed(x))

        def unsettled(h, delta, steps):
            return (delta.abs().max() > TOLERANCE) & (steps < MAX_STEPS)

        def refine(h, delta, steps):
            # Damped fixed-point iteration h <- (h + tanh(mix(h) + h0)) / 2.
            new = 0.5 * (h + torch.tanh(self.mix(h) + h0))
            return new, new - h, steps + 1

        start = torch.zeros_like(h0)
        h, _, steps = torch.while_loop(unsettled, refine, (start, torch.ones_like(h0), torch.zeros(())))
        return h, steps

    def forward(self, x):
        h, steps = self.hidden(x)
        p = torch.softmax(self.small(h), -1)
        # h.clone(): torch.export (torch 2.13) fails with an internal TypeError when a
        # while_loop result is passed straight to torch.cond as an operand.
        probs = torch.cond(p.max() > CONFIDENT,
                           lambda h, p: p.clone(),
                           lambda h, p: torch.softmax(self.big2(torch.relu(self.big1(h))), -1),
                           (h.clone(), p))
        return probs, steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", default="mps2-an386", help="board to emulate (see `eerie-c boards`)")
    ap.add_argument("--out", default="build/torch_cond", help="firmware project goes here")
    a = ap.parse_args(argv)

    # Quiet torch.export's internal notices about the saved program.
    logging.getLogger("torch._export").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.manual_seed(0)
    m = AdaptiveClassifier().eval()
    # Random inputs (untrained weights): some leave the small head sure, some do not, and the
    # loop needs a different number of steps for each.
    xs = np.random.default_rng(1).standard_normal((6, FEATURES)).astype(np.float32) * 2

    (probs, steps), report = eerie_c.run(m, [xs], (torch.randn(FEATURES),), board=a.board, out_dir=a.out)
    print(f"compiled {type(m).__name__} (torch.export: while_loop + cond) for {report['board']} "
          f"({report['target']}); firmware project in {a.out}/")

    # The module's own answers, in eager PyTorch, and which branch each input takes.
    worst, step_mismatch = 0.0, []
    with torch.no_grad():
        for i, x in enumerate(xs):
            ref_p, ref_n = m(torch.tensor(x))
            small = torch.softmax(m.small(m.hidden(torch.tensor(x))[0]), -1).max() > CONFIDENT
            worst = max(worst, float(np.abs(probs[i] - ref_p.numpy()).max()))
            if float(steps[i]) != float(ref_n):
                step_mismatch.append(i)
            print(f"input {i}: {int(steps[i]):2d} loop steps, {'early exit (small head)' if small else 'big head':23s} "
                  f"-> class {int(np.argmax(probs[i]))} (p = {probs[i].max():.3f}), "
                  f"{report['instructions_per_inference'][i]:,} instructions")
    if worst > 1e-5 or step_mismatch:
        print(f"MISMATCH with the PyTorch module: worst absolute difference {worst:.3g}, "
              f"loop step counts differ on inputs {step_mismatch}")
        return 1
    print(f"outputs match the PyTorch module: same loop step counts, probabilities within "
          f"{worst:.2g} (limit 1e-5)")
    print(f"flash: {report['flash_bytes']:,} B; RAM: {report['ram_static_bytes']:,} B data + bss "
          f"(arena {report['arena_bytes']:,} B); stack: proven bound {report['stack_bound_bytes']:,} B, "
          f"measured {report['invoke_stack_bytes']:,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
