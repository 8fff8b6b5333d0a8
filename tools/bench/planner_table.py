#!/usr/bin/env python3
"""The DQN planner against the best heuristic at each limit, from the JSON
that tools/bench/planner_frontier writes (--json).

At each limit the searching planners were given, the heuristics that may
claim it are every point of another planner whose peak is within the limit:
greedy and window at that limit, memonger, lms, SuperNeurons' switches,
vdnn and dymem at whichever setting fits. Overheads are relative to
liveness's iteration; "dqn - best" is in points of that iteration time.
With --milp points, the MILP's plan (marked "greedy's" where the plan CBC
started from replays faster than its own), its proven lower bound, and
greedy's and the DQN's distance above that bound in the same points.

    python3 tools/bench/planner_table.py r50.json [vgg16.json ...]

Prints one Markdown table per file.
"""
import json
import sys

SEARCHING = ("dqn", "dqn+greedy", "milp")
MIB = 1 << 20


def pct(x):
    return "%.2f%%" % (100 * x)


def best_heuristic(points, limit):
    fitting = [p for p in points
               if p["fits"] and p["planner"] not in SEARCHING and p["peak_bytes"] <= limit]
    return min(fitting, key=lambda p: p["overhead"]) if fitting else None


def at(points, planner, limit):
    for p in points:
        if p["planner"] == planner and p["limit_bytes"] == limit:
            return p
    return None


def cell(p):
    if p is None:
        return "-"
    return pct(p["overhead"]) if p["fits"] else "does not fit"


def table(doc):
    points = doc["points"]
    live = doc["liveness"]
    print("%s, batch %d, %s (simulated): liveness %.1f MiB, %.2f ms\n" %
          (doc["network"], doc["batch"], doc["profile"], live["peak_bytes"] / MIB,
           live["iteration_seconds"] * 1e3))
    milp = any(p["planner"] == "milp" for p in points)
    demo = any(p["planner"] == "dqn+greedy" for p in points)
    head = ["limit", "reduction", "dqn", "greedy", "window", "best heuristic", "dqn - best"]
    if demo:
        head += ["dqn+greedy", "dqn+greedy - best", "its best episode"]
    if milp:
        head += ["milp plan", "milp bound", "proven", "greedy - bound", "dqn - bound"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    limits = sorted({p["limit_bytes"] for p in points if p["planner"] in SEARCHING + ("greedy",)})
    for limit in limits:
        dqn = at(points, "dqn", limit)
        best = best_heuristic(points, limit)
        row = ["%.1f MiB" % (limit / MIB), pct(1 - limit / live["peak_bytes"]), cell(dqn),
               cell(at(points, "greedy", limit)), cell(at(points, "window", limit))]
        if best is None:
            row += ["none fits", "-"]
        else:
            name = best["planner"] + (" " + best["setting"] if best["setting"] else "")
            row.append("%s: %s" % (name, pct(best["overhead"])))
            if dqn is not None and dqn["fits"]:
                row.append("%+.2f" % (100 * (dqn["overhead"] - best["overhead"])))
            else:
                row.append("-")
        if demo:
            d = at(points, "dqn+greedy", limit)
            row.append(cell(d))
            if best is not None and d is not None and d["fits"]:
                row.append("%+.2f" % (100 * (d["overhead"] - best["overhead"])))
            else:
                row.append("-")
            row.append(str(d.get("best_episode", "-")) if d else "-")
        if milp:
            m = at(points, "milp", limit)
            plan = cell(m)
            if m is not None and m["fits"] and m.get("kept_start"):
                plan += " (greedy's)"
            row += [plan, pct(m["lower_bound_overhead"]) if m else "-",
                    ("yes" if m["optimal"] else "no") if m else "-"]
            for other in ("greedy", "dqn"):
                o = at(points, other, limit)
                if m is not None and o is not None and o["fits"]:
                    row.append("%+.2f" % (100 * (o["overhead"] - m["lower_bound_overhead"])))
                else:
                    row.append("-")
        print("| " + " | ".join(row) + " |")
    print()


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: planner_table.py FRONTIER.json [...]")
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("planner_table: %s: %s" % (path, e))
        table(doc)


if __name__ == "__main__":
    main()
