"""The instruction estimate of the int8 pools (kernels/_pool_split.py, _pool_avg.py), read by
estimate.py: from the kernel's own counts (Lowered.work["pool"], report.json's op "pool")."""
from __future__ import annotations

# int8 MAX_POOL_2D and AVERAGE_POOL_2D (kernels/_pool_split.py, _pool_avg.py) from the
# kernel's own counts (report.json's "pool": vector loads, one per window pixel and channel
# vector over the clipped windows as run, and vector stores, one per output pixel and
# vector): (per load, per store, fixed), least squares on relative errors by
# bench/pool_bench.py --fit over five one-layer models each (max: 96x96x8 2x2/2 VALID and
# 3x3/2 SAME, 48x48x20 2x2 RELU6, 32x32x3 2x2, 24x24x16 3x3/1 SAME RELU), in sample per layer
# within 0.75-1.2x (max) and 0.57-1.3x (average; low where many border windows divide one
# channel at a time, high on the scalar global pools). The
# vectors have POOL_LANES lanes (else 1); the channels past them count one vector each (DSP,
# scalar) or one predicated vector (Helium). An average over more than 256 elements sums in
# int32, one channel at a time, on every core: its counts have 1 lane, and where that is not
# the family's the in/out fallback below estimates it.
POOL_LANES = {("dsp", "MAX_POOL_2D"): 4, ("mve", "MAX_POOL_2D"): 16,
              ("dsp", "AVERAGE_POOL_2D"): 4, ("mve", "AVERAGE_POOL_2D"): 8}
POOL_COSTS = {("dsp", "MAX_POOL_2D"): (3.70, 1.10, 150), ("mve", "MAX_POOL_2D"): (4.48, 0, 150),
              ("v7m", "MAX_POOL_2D"): (4.95, 0, 150), ("rv32", "MAX_POOL_2D"): (2.59, 3.47, 150),
              # the average's store is the division of a vector's channels (kernels/_pool_avg.py);
              # its five cases: 96x96x8 2x2/2 VALID and 3x3/2 SAME, 48x48x20 2x2 RELU6, a
              # 25x5x64 global pool, 24x24x16 3x3/1 SAME RELU
              ("dsp", "AVERAGE_POOL_2D"): (5.76, 38.9, 150), ("mve", "AVERAGE_POOL_2D"): (4.98, 6.75, 150),
              ("v7m", "AVERAGE_POOL_2D"): (4.01, 0, 150), ("rv32", "AVERAGE_POOL_2D"): (3.65, 3.01, 150)}


def pool_cost(fam: str, kind: str, pool: dict) -> float | None:
    """Instructions of a pool of family `fam` (estimate.FAMILY's, v6m taken as v7m) from its
    counts; None where they are not this family's kernel's (another lane count) or there is
    no fit."""
    cost = POOL_COSTS.get((fam, kind))
    if cost is None or pool.get("lanes") != POOL_LANES.get((fam, kind), 1):
        return None
    per_load, per_store, fixed = cost
    return per_load * pool["loads"] + per_store * pool["stores"] + fixed
