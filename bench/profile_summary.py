"""Summarise a py-spy collapsed-stack profile: where each thread spends its samples.

python bench/profile_summary.py .bench/profiles/throughput-ours.txt [--top 25]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_THREAD = re.compile(r"^thread \((?P<id>[^)]*)\)(?::\s*(?P<name>[^;]*))?")
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame(text: str) -> str:
    """``Func (path/file.py:12)`` -> ``Func (path/file.py)``: lines merged per function."""
    match = _FRAME.match(text.strip())
    return f"{match['func']} ({match['file']})" if match else text.strip()


def summarise(path: Path, top: int = 25, package: str = "prime_runs") -> str:
    thread_names: dict[str, str] = {}
    per_thread: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    stacks: list[tuple[str, list[str], int]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        head = _THREAD.match(frames[0])
        thread = head["id"] if head else "?"
        if head and head["name"]:
            thread_names[thread] = head["name"].strip()
        stacks.append((thread, [_frame(f) for f in frames[1:]], count))
    for thread, frames, count in stacks:
        name = thread_names.get(thread, thread)
        per_thread[name] += count
        total += count
        if frames:
            self_time[f"[{name}] {frames[-1]}"] += count
        for frame in dict.fromkeys(frames):  # each function once per stack
            if package in frame or "sides.py" in frame:
                inclusive[f"[{name}] {frame}"] += count

    def rows(counts: list[tuple[str, int]]) -> list[str]:
        share = 100 / max(total, 1)
        return [f"  {count:6d} {count * share:5.1f}%  {name}" for name, count in counts]

    lines = [f"{path.name}: {total} samples", "samples by thread:"]
    lines += rows(per_thread.most_common())
    lines += [f"top {top} by self samples:", *rows(self_time.most_common(top))]
    lines += [f"top {top} {package} functions by inclusive samples:"]
    lines += rows(inclusive.most_common(top))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for path in args.profiles:
        print(summarise(path, args.top))


if __name__ == "__main__":
    main()
