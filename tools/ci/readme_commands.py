#!/usr/bin/env python3
"""Checks that every command in a Markdown guide runs as written.

Reads the ```sh blocks of the given files (continuation lines joined,
comments and heredoc bodies dropped) and, for each command line:
  * a script (`bash tools/X.sh`) must exist;
  * a program (`bazel-bin/tools/...`, also behind `mpirun ...`) must have
    been built, and every `--flag` it is given must appear in its --help;
  * every path it names inside the repository (configs/, models/, tests/,
    tools/) must exist;
  * and, unless the command is one of the long ones listed below (training
    runs, the test run itself, mpirun, the GPU scripts), it is run as
    written, in a scratch folder that holds the repository's inputs, and
    must exit 0.

Before running, it trains configs/lenet_fashion.yaml for a few steps (into
its run.output, runs/lenet_fashion), so that commands that read that run's
checkpoint find one. Exit status: 0 when every command passes, 1 otherwise.

  tools/ci/readme_commands.py --root REPO --bin DIR README.md [MORE.md ...]

REPO is where the inputs are (models/, configs/, tests/testdata/); DIR is
where the built programs are (bazel-bin, or a test's runfiles).
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# Commands checked but not run: they train for minutes, start MPI jobs,
# run the whole suite or need a GPU machine. Each is exercised elsewhere
# (trainer_test, data_parallel_test, CI itself, the GPU check).
LONG = ("bash tools/train.sh", "bash tools/test.sh", "bash tools/setup.sh", "mpirun",
        "bash tools/ci/gpu_check.sh tests", "bash tools/ci/gpu_bundle.sh",
        "bazel-bin/tools/train", "tools/train.sh", "bash tools/ci/sanitize.sh",
        "bash tools/ci/fuzz.sh", "bash tools/ci/tsan.sh", "bazel build", "bazel test",
        "python3", "/usr/bin/python3", "cat >", "bazel-bin/tools/bench/bench_train")
# Commands checked but not run, matched whole: the GPU check's window (on a
# GPU machine; exercised by tests/gpu_check_test.sh and its dry run here).
LONG_EXACT = ("bash tools/ci/gpu_check.sh",)
PATH_PREFIXES = ("configs/", "models/", "tests/", "tools/")
TIMEOUT_SECONDS = 600


def commands(markdown):
    """The command lines of the ```sh blocks, continuation lines joined."""
    found = []
    in_block = False
    heredoc = None
    pending = ""
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_block = line.strip() in ("```sh", "```bash")
            continue
        if not in_block:
            continue
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        text = pending + line.strip()
        pending = ""
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        text = re.sub(r"\s+#.*$", "", text) if not text.startswith("#") else ""
        if not text:
            continue
        match = re.search(r"<<'?(\w+)'?", text)
        if match:
            heredoc = match.group(1)
        found.append(text)
    return found


def program_of(tokens):
    """The built program (a path below bazel-bin) a command runs, if any."""
    for t in tokens:
        if t.startswith("bazel-bin/"):
            return t[len("bazel-bin/"):]
    return None


def flags_of(tokens, program):
    start = tokens.index("bazel-bin/" + program) + 1
    return [t.split("=")[0] for t in tokens[start:] if t.startswith("--")]


def check_static(command, root, bin_dir, helps):
    problems = []
    tokens = shlex.split(command)
    if tokens[:1] == ["bash"] and len(tokens) > 1 and not os.path.isfile(os.path.join(root, tokens[1])):
        problems.append("no script " + tokens[1])
    program = program_of(tokens)
    if program:
        binary = os.path.join(bin_dir, program)
        if not os.path.isfile(binary):
            problems.append("no program " + program + " (is it built?)")
        else:
            if binary not in helps:
                helps[binary] = subprocess.run([binary, "--help"], capture_output=True, text=True,
                                               timeout=60).stdout
            for flag in flags_of(tokens, program):
                if not re.search(re.escape(flag) + r"\b", helps[binary]):
                    problems.append(program + " has no flag " + flag)
    for t in tokens:
        if t.startswith(PATH_PREFIXES) and not os.path.exists(os.path.join(root, t)):
            if not t.startswith(("tools/", "tests/")) or "/" in t[6:]:
                problems.append("no file " + t)
    return problems


def scratch(root, bin_dir):
    """A folder with the repository's inputs and bazel-bin, for running commands."""
    folder = tempfile.mkdtemp(prefix="readme-commands-")
    for name in ("configs", "models", "tests", "tools"):
        os.symlink(os.path.join(root, name), os.path.join(folder, name))
    os.symlink(bin_dir, os.path.join(folder, "bazel-bin"))
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--bin", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    root, bin_dir = os.path.abspath(args.root), os.path.abspath(args.bin)
    folder = scratch(root, bin_dir)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    setup = [os.path.join(bin_dir, "tools/train"), "--config", "configs/lenet_fashion.yaml",
             "--max-steps", "5", "--no-progress"]
    prepared = subprocess.run(setup, cwd=folder, capture_output=True, text=True, env=env)
    if prepared.returncode != 0:
        print("could not train the run the guide's commands read:\n" + prepared.stderr)
        return 1
    failures, ran, checked = 0, 0, 0
    helps = {}
    for path in args.files:
        with open(path) as f:
            for command in commands(f.read()):
                checked += 1
                problems = check_static(command, root, bin_dir, helps)
                if not problems and not command.startswith(LONG) and command not in LONG_EXACT:
                    ran += 1
                    result = subprocess.run(command, shell=True, cwd=folder, capture_output=True,
                                            text=True, env=env, timeout=TIMEOUT_SECONDS)
                    if result.returncode != 0:
                        problems.append("exit %d: %s" % (result.returncode,
                                                         (result.stderr or result.stdout)[-400:]))
                status = "ok  " if not problems else "FAIL"
                print("%s %s: %s" % (status, os.path.basename(path), command))
                for p in problems:
                    print("       " + p)
                failures += bool(problems)
    shutil.rmtree(folder, ignore_errors=True)
    print("%d commands checked, %d run, %d failed" % (checked, ran, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
