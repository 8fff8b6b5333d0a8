#!/usr/bin/env python3
"""The DQN planner's generalization claim: a Q-network trained on a small
ResNet (models/resnet_deep.yaml, one bottleneck unit per stage) planning
ResNet-50 and ResNet-101, applied as it is (one greedy episode) and fine-tuned
(a tenth of the episodes), against training from scratch - with greedy's
plan beside each. Every network at batch 32, 224x224, at the limit halfway
between its liveness peak and offload_recompute's smallest budget; times are
the timeline simulator's on gtx1080ti-pcie3 (a simulation, not a
measurement), plans under the `ideal` allocator with each step's fastest
algorithms.

    bazel build -c opt //tools:plan
    python3 tools/bench/planner_transfer.py [--episodes 300] [--json out.json]

Prints a Markdown table: overhead over liveness and wall seconds to plan.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile

COMMON = ["--batch", "32", "--allocator", "ideal", "--workspace", "fastest", "--timing",
          "model", "--device-profile", "gtx1080ti-pcie3", "--json"]
SMALL = ["--set", "n1=1", "--set", "n2=1", "--set", "n3=1", "--set", "n4=1"]
TARGETS = [("ResNet-50", "models/resnet50.yaml", []), ("ResNet-101", "models/resnet101.yaml", [])]


def plan(binary, config, sets, *flags):
    out = subprocess.run([binary, "--config", config, *sets, *COMMON, *flags],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["modes"][0]


def limit_of(binary, config, sets):
    peak = plan(binary, config, sets, "--memory", "liveness")
    floor = plan(binary, config, sets, "--memory", "offload_recompute", "--minimum")
    seconds = peak["prediction"]["iteration_seconds"]
    return (peak["peak_bytes"] + floor["minimum_budget_bytes"]) // 2, seconds


def run(binary, config, sets, limit, mode, *flags):
    m = plan(binary, config, sets, "--memory", mode, "--device-memory", str(limit), *flags)
    if not m["fits"]:
        return {"fits": False, "failure": m.get("failure", "")}
    p = m.get("planner", {})
    return {"fits": True, "seconds": m["prediction"]["iteration_seconds"],
            "peak": m["peak_bytes"], "train_seconds": p.get("train_seconds", 0.0),
            "episodes": p.get("episodes", 0), "best_episode": p.get("best_episode", 0),
            "weights": p.get("weights", "")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="planner_transfer_")
    dqn = ["--planner-cache", cache]
    episodes = ["--planner-episodes", str(args.episodes)]
    tune = ["--planner-episodes", str(max(1, args.episodes // 10))]
    limit, base = limit_of(args.plan, "models/resnet_deep.yaml", SMALL)
    source = run(args.plan, "models/resnet_deep.yaml", SMALL, limit, "dqn", *dqn, *episodes)
    if not source["fits"] or not source["weights"]:
        sys.exit("the small ResNet's training found no plan: " + source.get("failure", ""))
    model = ["--planner-model", source["weights"]]
    results = {"source": dict(source, limit=limit, liveness_seconds=base), "targets": {}}
    for name, config, sets in TARGETS:
        limit, base = limit_of(args.plan, config, sets)
        rows = {
            "greedy": run(args.plan, config, sets, limit, "greedy"),
            "dqn from scratch": run(args.plan, config, sets, limit, "dqn", *dqn, *episodes),
            "small ResNet's model, applied": run(args.plan, config, sets, limit, "dqn", *dqn,
                                                 *model, "--planner-episodes", "1"),
            "small ResNet's model, fine-tuned": run(args.plan, config, sets, limit, "dqn", *dqn,
                                                    *model, *tune),
        }
        results["targets"][name] = {"limit": limit, "liveness_seconds": base, "runs": rows}
    print("| network | limit | planner | overhead | episodes (best at) | planned in |")
    print("|---|---|---|---|---|---|")
    s = results["source"]
    print(f"| small ResNet (source) | {s['limit'] / 2**30:.2f} GiB | dqn | "
          f"{100 * (s['seconds'] / s['liveness_seconds'] - 1):.2f}% | {s['episodes']} ({s['best_episode']}) | "
          f"{s['train_seconds']:.0f} s |")
    for name, t in results["targets"].items():
        for planner, r in t["runs"].items():
            if not r["fits"]:
                print(f"| {name} | {t['limit'] / 2**30:.2f} GiB | {planner} | no plan | | |")
                continue
            overhead = 100 * (r["seconds"] / t["liveness_seconds"] - 1)
            eps = f"{r['episodes']} ({r['best_episode']})" if r["episodes"] else ""
            print(f"| {name} | {t['limit'] / 2**30:.2f} GiB | {planner} | {overhead:.2f}% | "
                  f"{eps} | {r['train_seconds']:.0f} s |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    shutil.rmtree(cache)


if __name__ == "__main__":
    main()
