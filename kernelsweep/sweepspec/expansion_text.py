"""What `kernelsweep validate` says about how a spec's points were chosen: per block, the grid, what its
strategy picked and guarantees, how many points that makes (or which shapes a search tunes), and the
points dropped, grouped by reason."""

from __future__ import annotations

import math

from kernelsweep.sweepspec.expansion import Expansion


def describe(expansion: Expansion) -> list[str]:
    lines = []
    for plan in expansion.blocks:
        head = f"kernels[{plan.index}] {plan.kernel}: {plan.strategy}"
        picked = f"{plan.picked} of {plan.grid_size} grid combination(s)"
        lines.append(f"{head}: {picked}; guarantee: {plan.guarantee}")
        if plan.targets:
            settings = plan.targets[0].settings
            space = plan.targets[0].space
            size = math.prod(len(v) for v in space.values())
            lines.append(
                f"  search ({settings.sampler}, seed {settings.seed}, objective {settings.objective}) over "
                f"{', '.join(space)} ({size} configurations) for {len(plan.targets)} shape(s), budget "
                f"{settings.budget} each: up to {settings.budget * len(plan.targets)} points"
            )
        else:
            twins = sum(1 for p in expansion.points if p.baseline_of == plan.kernel)  # kernelsweep.baselines
            with_twins = f", and {twins} of its baseline (same shapes)" if twins else ""
            lines.append(f"  {sum(plan.valid.values())} point(s){with_twins}, {plan.drops.total} dropped")
    drops = expansion.drops
    if drops.total:
        lines.append(f"dropped {drops.total} point(s), by reason:")
        lines += ["  " + line for line in drops.lines()]
    return lines
