#!/usr/bin/env python3
"""The peer: hearsay's gossip model written in Mesa, for a side-by-side timing.

    scripts/bench-mesa.py --npcs 1000 --ticks 100 [--width W --height H --radius 3 --seed 1]

The model is the one hearsay's offline brain runs, without memory: NPCs on a grid; an
NPC that knows the rumour tells everyone within hearing radius (Euclidean) who does not
know it yet; otherwise it walks one step (diagonals allowed) toward its target, keeping
it with probability 0.75, staying put with probability 0.1, else picking a new target up
to 5 cells away on each axis. One NPC knows the rumour at the start. Prints one JSON
line: wall time, ticks per second, and the spread (the tick half of the NPCs knew it).

Mesa comes from PyPI into a venv this script makes and reuses, outside the repository
(${HEARSAY_CACHE:-~/.cache/hearsay}/mesa); the first run takes a minute.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

MESA_VERSION = "3.3.1"


def ensure_mesa():
    try:
        import mesa  # noqa: F401
        return
    except ImportError:
        pass
    cache = os.environ.get("HEARSAY_CACHE", os.path.expanduser("~/.cache/hearsay"))
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    venv = os.path.join(cache, "mesa", f"venv-mesa-{MESA_VERSION}-{tag}")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print(f"bench-mesa: creating {venv} (mesa {MESA_VERSION} from PyPI)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "--disable-pip-version-check", "-q", "install",
                        f"mesa=={MESA_VERSION}"], check=True, stdout=sys.stderr)
    os.execv(python, [python] + sys.argv)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--npcs", type=int, required=True)
    p.add_argument("--ticks", type=int, required=True)
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--radius", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    # The density and shape of the 200-NPC town: 200 NPCs on 64 x 40.
    area = args.npcs * 64 * 40 / 200
    width = args.width or max(8, round(math.sqrt(area * 1.6)))
    height = args.height or max(8, round(area / width))

    ensure_mesa()
    import mesa

    class Person(mesa.Agent):
        def __init__(self, model, knows):
            super().__init__(model)
            self.knows = knows
            self.target = None

        def step(self):
            m = self.model
            r = m.radius
            if self.knows:
                near = m.grid.get_neighbors(self.pos, moore=True, include_center=True, radius=r)
                x, y = self.pos
                hearers = [a for a in near if a is not self and not a.knows
                           and (a.pos[0] - x) ** 2 + (a.pos[1] - y) ** 2 <= r * r]
                if hearers:
                    for a in hearers:
                        a.knows = True
                        m.learned += 1
                    return
            rng = m.random
            if self.target is not None and self.target != self.pos and rng.random() < 0.75:
                pass
            elif rng.random() < 0.1:
                return
            else:
                x, y = self.pos
                self.target = (min(max(x + rng.randint(-5, 5), 0), m.width - 1),
                               min(max(y + rng.randint(-5, 5), 0), m.height - 1))
            (x, y), (tx, ty) = self.pos, self.target
            step = (x + (tx > x) - (tx < x), y + (ty > y) - (ty < y))
            if step != self.pos:
                m.grid.move_agent(self, step)

    class Town(mesa.Model):
        def __init__(self):
            super().__init__(seed=args.seed)
            self.width, self.height, self.radius = width, height, args.radius
            self.grid = mesa.space.MultiGrid(width, height, torus=False)
            self.learned = 1
            for i in range(args.npcs):
                a = Person(self, i == 0)
                self.grid.place_agent(a, (self.random.randrange(width), self.random.randrange(height)))

        def step(self):
            self.agents.shuffle_do("step")

    town = Town()
    half = None
    started = time.perf_counter()
    for tick in range(args.ticks):
        town.step()
        if half is None and town.learned * 2 >= args.npcs:
            half = tick
    wall = time.perf_counter() - started
    print(json.dumps({
        "model": "mesa", "mesa": mesa.__version__, "npcs": args.npcs, "ticks": args.ticks,
        "width": width, "height": height, "radius": args.radius,
        "wall_s": wall, "ticks_per_s": args.ticks / wall, "ms_per_tick": wall * 1000 / args.ticks,
        "half_tick": half, "knowers": town.learned,
    }))


if __name__ == "__main__":
    main()
