#!/usr/bin/env python3
"""Mutation testing of the CUDA kernels on the emulator.

Applies mutation operators to a copy of `kernels/`, at every site each operator fits, one mutant
at a time, and runs the emulated suite on each mutant:

    kda-block emulate --kernels MUTANT_DIR --out OUT_DIR --fail-fast                      (plain)
    ... --sanitizer address     (AddressSanitizer + UBSan, only if the plain run passed)
    ... --sanitizer thread      (ThreadSanitizer, only if the ASan run passed too)

A mutant is *killed* by the first stage that rejects it:

    build   the emulated C++ build rejected it, or the resolve-time check found the kernel's C
            parameter types contradicting kernels.toml ("does not take the parameters")
    suite   the plain emulated suite: a result mismatch (`FAIL`), a launch error of the emulator
            (barrier / shuffle / deadlock, `FAILED to run`), a crash or a timeout
    asan    the AddressSanitizer + UBSan build (a sanitizer report, or a mismatch there)
    tsan    the ThreadSanitizer build (a sanitizer report, or a mismatch there)

and *survives* if every run passes (`--stages` picks the runs: ThreadSanitizer is the one that
sees a missing barrier whose race the plain runs happen to order safely). Each run checks the
cases of the kernels whose module is the mutated file or includes it (`kda-block emulate --only`), and
the whole block; a mutant of a header every module includes runs every case. Operators:

    remove-syncthreads  delete one `__syncthreads()` call (the `;` stays, an empty statement)
    remove-syncwarp     delete one `__syncwarp()` call
    loop-bound          move the bound of a `for` condition `a < b` / `a <= b` by one, both ways
    drop-wait           delete one `cp_async_wait<N>()` call
    swap-decay-index    swap the operands of a log-decay difference, or shift a decay index by
                        one, in kernels/kda_chunk.cu and kernels/kda_recurrent.cu
    drop-const          remove `const` from one pointer parameter of an `extern "C" __global__`

Each mutant differs from the original file only in the mutated bytes. The real `kernels/` is
only read: mutants are written into one fixed directory (default /tmp/kda-mutant/w0/kernels),
refreshed from `kernels/` before each mutant, and built into one fixed `--out` directory, so the
build cache recompiles only the modules a mutant touches. Everything runs under `nice -n 19`.

Usage:

    scripts/mutate.py --list                      # the mutants, not run
    scripts/mutate.py --report docs/mutation-run.md
    scripts/mutate.py --operators drop-wait,drop-const --jobs 1
    scripts/mutate.py --operators remove-syncthreads,remove-syncwarp --stages plain,thread

The `kda-block` binary must be built first: `cargo build --release --bin kda-block`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "kernels"
KDA = REPO / "target" / "release" / "kda-block"
STAGES = ("plain", "address", "thread")
KILL_CLASSES = ("build", "suite", "asan", "tsan")
STAGE_CLASS = {"plain": "suite", "address": "asan", "thread": "tsan"}
# Per-stage wall-clock limits (a mutant that runs past one is killed by that stage: "timeout").
DEFAULT_TIMEOUTS = {"plain": 300, "address": 600, "thread": 900}


# ---------------------------------------------------------------------------------------------
# Source scanning


def code_mask(text: str) -> list[bool]:
    """True at every character of `text` that is code (not in a comment, string or char literal)."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for p in range(i, j):
                mask[p] = False
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for p in range(i, j):
                mask[p] = False
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            for p in range(i, j):
                mask[p] = False
            i = j
        else:
            i += 1
    return mask


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def line_text(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : len(text) if end < 0 else end]


def matching_paren(text: str, open_at: int) -> int:
    """Index of the `)` closing the `(` at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parenthesis at {open_at}")


def top_level_splits(s: str, sep: str) -> list[int]:
    """Offsets of `sep` in `s` outside any (), [] or {}."""
    depth, out = 0, []
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(i)
    return out


def depth_map(s: str) -> list[int]:
    depth, out = 0, []
    for c in s:
        if c in ")]}":
            depth -= 1
        out.append(depth)
        if c in "([{":
            depth += 1
    return out


# ---------------------------------------------------------------------------------------------
# Mutants


@dataclasses.dataclass
class Mutant:
    operator: str
    file: str  # relative to kernels/
    line: int
    start: int  # the replaced span of the original file
    end: int
    replacement: str
    note: str = ""

    def apply(self, original: str) -> str:
        return original[: self.start] + self.replacement + original[self.end :]

    def mutated_line(self, original: str) -> str:
        text = self.apply(original)
        return line_text(text, self.start).strip()

    def original_line(self, original: str) -> str:
        return line_text(original, self.start).strip()

    def describe(self, original: str) -> str:
        """The mutated line, or for a deleted call, what was deleted."""
        if self.replacement == "" and self.operator in ("remove-syncthreads", "remove-syncwarp", "drop-wait"):
            return f"{self.original_line(original)}  ->  {self.mutated_line(original)}"
        return self.mutated_line(original)

    @property
    def key(self) -> str:
        return f"{self.operator}:{self.file}:{self.line}:{self.start}:{self.replacement}"


def kernel_files() -> list[Path]:
    return sorted(p for p in KERNELS.iterdir() if p.suffix in (".cu", ".cuh"))


# A table entry of kernels.toml: its field and its module (a .cu file's stem).
MANIFEST_ENTRY = re.compile(r'^(\w+)\s*=\s*\{\s*module\s*=\s*"(\w+)"', re.M)


@functools.cache
def kernels_of(file: str) -> tuple[str, ...]:
    """The table fields whose module is `file` or includes it, directly or through other headers;
    empty when every module does (the whole suite runs). Read once per file: mutants are written
    elsewhere, and `kernels/` and the manifest stay as they are for the whole run."""
    fields: dict[str, list[str]] = {}
    for field, module in MANIFEST_ENTRY.findall((REPO / "kernels.toml").read_text()):
        fields.setdefault(module, []).append(field)
    texts = {p.name: p.read_text() for p in kernel_files()}
    reach = {file}
    while True:
        more = {name for name, text in texts.items()
                if any(re.search(rf'#include\s+"{re.escape(r)}"', text) for r in reach)} - reach
        if not more:
            break
        reach |= more
    modules = {Path(name).stem for name in reach if name.endswith(".cu")} & fields.keys()
    if modules == fields.keys():
        return ()
    return tuple(sorted(field for module in modules for field in fields[module]))


def calls(operator: str, pattern: str, files: list[Path]) -> list[Mutant]:
    """Every code occurrence of the call `pattern` (a regex matching `name...()`, no `;`): the call
    is deleted, its `;` stays as an empty statement (valid wherever the call was)."""
    out = []
    for path in files:
        text = path.read_text()
        mask = code_mask(text)
        for m in re.finditer(pattern + r"\s*;", text):
            if not mask[m.start()]:
                continue
            call_end = text.index(";", m.start())
            out.append(Mutant(operator, path.name, line_of(text, m.start()), m.start(), call_end, ""))
    return out


def op_remove_syncthreads() -> list[Mutant]:
    return calls("remove-syncthreads", r"\b__syncthreads\s*\(\s*\)", kernel_files())


def op_remove_syncwarp() -> list[Mutant]:
    return calls("remove-syncwarp", r"\b__syncwarp\s*\(\s*\)", kernel_files())


def op_drop_wait() -> list[Mutant]:
    return calls("drop-wait", r"\bcp_async_wait\s*<[^<>;]+>\s*\(\s*\)", kernel_files())


# Operators of lower precedence than binary +/- that, at the top level of a bound, need the bound
# parenthesised before `- 1` / `+ 1` is appended.
LOW_PRECEDENCE = re.compile(r"<<|>>|&|\||\^|\?|<|>|=|,")


def bump(bound: str, delta: str) -> str:
    """`bound` moved by `delta` (" - 1" or " + 1"), parenthesised if it needs it."""
    core = bound.rstrip()
    trailing = bound[len(core) :]
    depths = depth_map(core)
    masked = "".join(c if d == 0 else " " for c, d in zip(core, depths))
    if LOW_PRECEDENCE.search(masked):
        core = f"({core.strip()})"
        lead = bound[: len(bound) - len(bound.lstrip())]
        return lead + core + delta + trailing
    return core + delta + trailing


def op_loop_bound() -> list[Mutant]:
    out = []
    for path in kernel_files():
        text = path.read_text()
        mask = code_mask(text)
        for m in re.finditer(r"\bfor\s*\(", text):
            if not mask[m.start()]:
                continue
            open_at = m.end() - 1
            close_at = matching_paren(text, open_at)
            header = text[open_at + 1 : close_at]
            semis = top_level_splits(header, ";")
            if len(semis) != 2:
                continue  # range-for or malformed
            c0, c1 = semis[0] + 1, semis[1]
            cond = header[c0:c1]
            # Hide template arguments of casts and anything nested, then find the comparison.
            hidden = re.sub(r"\b\w+_cast\s*<[^<>]*>", lambda x: " " * len(x.group(0)), cond)
            depths = depth_map(hidden)
            flat = "".join(c if d == 0 else " " for c, d in zip(hidden, depths))
            if re.search(r"&&|\|\||\?", flat):
                continue
            ops = [x for x in re.finditer(r"<<=?|>>=?|<=|>=|==|!=|<|>", flat)]
            rel = [x for x in ops if x.group(0) in ("<", "<=", ">", ">=", "==", "!=")]
            if len(rel) != 1 or rel[0].group(0) not in ("<", "<="):
                continue
            op = rel[0]
            base = open_at + 1 + c0  # offset of cond in text
            op_start, op_end = base + op.start(), base + op.end()
            bound_start, bound_end = op_end, base + len(cond)
            bound = text[bound_start:bound_end]
            line = line_of(text, op_start)
            if op.group(0) == "<":
                out.append(Mutant("loop-bound", path.name, line, bound_start, bound_end, bump(bound, " - 1"),
                                  "bound - 1"))
                out.append(Mutant("loop-bound", path.name, line, op_start, op_end, "<=", "< to <= (bound + 1)"))
            else:
                out.append(Mutant("loop-bound", path.name, line, op_start, op_end, "<", "<= to < (bound - 1)"))
                out.append(Mutant("loop-bound", path.name, line, bound_start, bound_end, bump(bound, " + 1"),
                                  "bound + 1"))
    return out


# The decay sites: (file, exact original text, replacement, what it does). Every code occurrence of
# the text is a site. The cumulative log-decay is `gc` (prepare's attention stage holds it as
# `st.g(row, x)`, its last real row is `closing`); the scan takes its decays from prepare (`sdec`);
# the recurrent kernels' is `in.decay`, e^{gate}. Both take each gate from `ForgetGate::log_decay`.
DECAY_SITES = [
    ("kda_chunk.cu", "forget.log_decay(at(i) + x, channel, rate)", "forget.log_decay(at(i + 1) + x, channel, rate)",
     "prepare: cumulative log-decay gc[i] sums the gate of position i + 1"),
    ("kda_chunk.cu", "expf(st.g(i, xx) - st.g(j, xx))", "expf(st.g(j, xx) - st.g(i, xx))",
     "prepare, pairs within a sub-block: exp(gc_i - gc_j) -> exp(gc_j - gc_i)"),
    ("kda_chunk.cu", "- st.g(j, xx))", "- st.g(j + 1, xx))",
     "prepare, pairs within a sub-block: exp(gc_i - gc_j) -> exp(gc_i - gc_{j+1})"),
    ("kda_chunk.cu", "- st.g(i / SUB * SUB, xx))", "- st.g(i / SUB * SUB + 1, xx))",
     "prepare, left factor: exp(gc_i - gc_r) -> exp(gc_i - gc_{r+1})"),
    ("kda_chunk.cu", "expf(st.g(at_c.boundary, xx) - st.g(at_c.j, xx))",
     "expf(st.g(at_c.boundary - 1, xx) - st.g(at_c.j, xx))",
     "prepare, right factor: exp(gc_r - gc_j) -> exp(gc_{r-1} - gc_j)"),
    ("kda_chunk.cu", "from_start = expf(gc[at_g])", "from_start = expf(gc[at_g + 1])",
     "prepare: e^{gc} of the next channel (w's operand and qdec)"),
    ("kda_chunk.cu", "expf(closing[x0 + xx] - gc[at_g])", "expf(gc[at_g] - closing[x0 + xx])",
     "prepare, kdec: exp(gc_l - gc_i) -> exp(gc_i - gc_l)"),
    ("kda_chunk.cu", "closing[x] = acc;", "closing[x] = gc[at(C - 2) + x];",
     "prepare: the closing row taken one row before the chunk's last"),
    ("kda_chunk.cu", "= expf(closing[x]);", "= expf(closing[x + 1]);",
     "prepare, sdec: the next channel's closing decay"),
    ("kda_chunk.cu", "sdec_at[8]", "sdec_at[9]",
     "scan: state row k + 8 decayed by the next channel's sdec"),
    ("kda_recurrent.cu", "forget.log_decay(at.gate_at + i, at.channel + i, at.rate)",
     "forget.log_decay(at.gate_at + i + 1, at.channel + i + 1, at.rate)", "recurrent: decay[i] = e^{g[i+1]}"),
    ("kda_recurrent.cu", "* in.decay[i]", "* in.decay[i + 1]",
     "recurrent: pass 1 decays row i by decay[i+1]"),
]


def op_swap_decay_index() -> list[Mutant]:
    out = []
    for file, old, new, note in DECAY_SITES:
        path = KERNELS / file
        text = path.read_text()
        mask = code_mask(text)
        found = [m.start() for m in re.finditer(re.escape(old), text) if mask[m.start()]]
        if not found:
            print(f"warning: swap-decay-index site `{old}` no longer in {file}", file=sys.stderr)
        for at in found:
            out.append(Mutant("swap-decay-index", file, line_of(text, at), at, at + len(old), new, note))
    out.sort(key=lambda m: (m.file, m.start))
    return out


def op_drop_const() -> list[Mutant]:
    out = []
    for path in kernel_files():
        text = path.read_text()
        mask = code_mask(text)
        for m in re.finditer(r'extern\s+"C"\s+__global__\b', text):
            if not mask[m.start()]:
                continue
            body = text.index("{", m.end())
            close_at = text.rindex(")", m.end(), body)
            depth, open_at = 0, close_at
            while True:
                c = text[open_at]
                depth += c == ")"
                depth -= c == "("
                if depth == 0:
                    break
                open_at -= 1
            params = text[open_at + 1 : close_at]
            cuts = [-1] + top_level_splits(params, ",") + [len(params)]
            for a, b in zip(cuts, cuts[1:]):
                param = params[a + 1 : b]
                pm = re.match(r"\s*(const\s+)\w+\s*\*", param)
                if pm:
                    at = open_at + 1 + a + 1 + pm.start(1)
                    out.append(Mutant("drop-const", path.name, line_of(text, at), at, at + len(pm.group(1)), ""))
    return out


OPERATORS = {
    "remove-syncthreads": (op_remove_syncthreads, "delete one `__syncthreads();` call"),
    "remove-syncwarp": (op_remove_syncwarp, "delete one `__syncwarp();` call"),
    "loop-bound": (op_loop_bound, "for-condition `a < b` -> `a < b - 1`, `a <= b`; `a <= b` -> `a < b`, `a <= b + 1`"),
    "drop-wait": (op_drop_wait, "delete one `cp_async_wait<N>();` call"),
    "swap-decay-index": (op_swap_decay_index, "swap a log-decay difference or shift a decay index by one"),
    "drop-const": (op_drop_const, "remove `const` from one pointer parameter of an extern \"C\" __global__ kernel"),
}


# ---------------------------------------------------------------------------------------------
# Running


@dataclasses.dataclass
class Result:
    mutant: Mutant
    killed_by: str | None  # one of KILL_CLASSES, None = survived
    reason: str
    seconds: float
    stages: list[tuple[str, float, int]]


def classify(output: str, rc: int, stage: str) -> tuple[str, str]:
    """(kill class, reason) of a failed run."""
    if "does not take the parameters" in output:
        line = next((l for l in output.splitlines() if "does not take the parameters" in l), "")
        return "build", "resolve: " + line.strip()[:300]
    if "Error: the emulated build failed" in output:
        lines = output.split("Error: the emulated build failed", 1)[1].splitlines()
        detail = next((l.strip() for l in lines[1:] if "error" in l.lower()), lines[1].strip() if len(lines) > 1 else "")
        return "build", "build: " + detail[:300]
    cls = STAGE_CLASS[stage]
    for marker in ("FAILED to run", " FAIL "):
        line = next((l for l in output.splitlines() if marker in l), None)
        if line is not None:
            kind = "launch" if marker == "FAILED to run" else "mismatch"
            for tag in ("ThreadSanitizer", "AddressSanitizer", "runtime error:", "LeakSanitizer"):
                if tag in output:
                    kind = tag.rstrip(":")
                    break
            return cls, f"{kind}: {' '.join(line.split())[:300]}"
    if rc < 0:
        # A crash of the plain run: the in-process emulator died, typically glibc aborting on a
        # heap overrun (`free(): invalid next size`) or a segfault on a wild access.
        lines = [l.strip() for l in output.splitlines() if l.strip() and not l.startswith("on the CUDA")]
        return cls, f"crash: signal {-rc}" + (f" ({lines[-1][:200]})" if lines else "")
    tail = " | ".join(l.strip() for l in output.strip().splitlines()[-3:])
    return cls, f"exit {rc}: {tail[:300]}"


class Worker:
    """One mutant directory and one build directory, reused for every mutant it runs."""

    def __init__(self, root: Path, index: int, timeouts: dict[str, int], stages: tuple[str, ...],
                 keep_logs: Path | None):
        self.dir = root / f"w{index}"
        self.stages = stages
        self.kernels = self.dir / "kernels"
        self.out = self.dir / "out"
        self.timeouts = timeouts
        self.keep_logs = keep_logs
        self.current: dict[str, bytes] = {}
        self.kernels.mkdir(parents=True, exist_ok=True)

    def refresh(self, mutated_file: str | None, mutated_text: str | None) -> None:
        """Make the mutant directory a byte-exact copy of kernels/, with one file replaced."""
        wanted = {p.name: p.read_bytes() for p in KERNELS.iterdir() if p.is_file()}
        if mutated_file is not None:
            wanted[mutated_file] = mutated_text.encode()
        for p in list(self.kernels.iterdir()):
            if p.name not in wanted:
                if p.is_dir():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        for name, data in wanted.items():
            target = self.kernels / name
            if not target.exists() or target.read_bytes() != data:
                target.write_bytes(data)

    def emulate(self, stage: str, only: tuple[str, ...]) -> tuple[int, str, float]:
        cmd = ["nice", "-n", "19", str(KDA), "emulate", "--kernels", str(self.kernels), "--out", str(self.out),
               "--fail-fast"]
        if only:
            cmd += ["--only", ",".join(only)]
        if stage != "plain":
            cmd += ["--sanitizer", stage]
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.timeouts[stage])
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # this run's own process group
            out, _ = proc.communicate()
            rc = 124
            out += f"\nmutate.py: TIMEOUT after {self.timeouts[stage]} s\n".encode()
        return rc, out.decode(errors="replace"), time.monotonic() - started

    def run(self, mutant: Mutant) -> Result:
        original = (KERNELS / mutant.file).read_text()
        self.refresh(mutant.file, mutant.apply(original))
        started = time.monotonic()
        stages = []
        only = kernels_of(mutant.file)
        for stage in self.stages:
            rc, output, seconds = self.emulate(stage, only)
            stages.append((stage, seconds, rc))
            if self.keep_logs is not None:
                (self.keep_logs / f"{mutant.operator}-{mutant.file}-{mutant.line}-{mutant.start}-{stage}.log").write_text(output)
            if rc == 124 and "mutate.py: TIMEOUT" in output:
                return Result(mutant, STAGE_CLASS[stage], f"timeout after {self.timeouts[stage]} s",
                              time.monotonic() - started, stages)
            if rc != 0:
                cls, reason = classify(output, rc, stage)
                return Result(mutant, cls, reason, time.monotonic() - started, stages)
        return Result(mutant, None, "", time.monotonic() - started, stages)


def check_baseline(worker: Worker, mutants: list[Mutant]) -> None:
    """The unmutated kernels through every stage, on the cases the mutants' runs check."""
    worker.refresh(None, None)
    scopes = [kernels_of(file) for file in {m.file for m in mutants}]
    only = () if () in scopes else tuple(sorted({field for scope in scopes for field in scope}))
    for stage in worker.stages:
        rc, output, seconds = worker.emulate(stage, only)
        print(f"baseline {stage}: rc {rc}, {seconds:.0f} s", flush=True)
        if rc != 0:
            sys.exit(f"the unmutated kernels fail the {stage} run; mutation results would mean nothing:\n{output}")


# ---------------------------------------------------------------------------------------------
# Reporting


def site_key(m: Mutant) -> tuple:
    # loop-bound makes two mutants of one condition; every other mutant is its own site.
    return (m.operator, m.file, m.line) if m.operator == "loop-bound" else (m.operator, m.file, m.start, m.replacement)


def summarise(results: list[Result], operators: list[str], mutants: list[Mutant]) -> dict[str, dict[str, int]]:
    table = {}
    for op in operators:
        mine_m = [m for m in mutants if m.operator == op]
        row = {"sites": len({site_key(m) for m in mine_m}), "mutants": len(mine_m)}
        mine = [r for r in results if r.mutant.operator == op]
        row["run"] = len(mine)
        for cls in KILL_CLASSES:
            row[cls] = sum(r.killed_by == cls for r in mine)
        row["survived"] = sum(r.killed_by is None for r in mine)
        table[op] = row
    return table


def rate(killed: int, of: int) -> str:
    return f"{killed}/{of} ({100 * killed / of:.0f}%)" if of else "-"


def markdown(table: dict[str, dict[str, int]], results: list[Result], originals: dict[str, str],
             wall: float, command: str, unrun: list[Mutant]) -> str:
    lines = [f"Command: `{command}`", "",
             "| operator | sites | mutants | run | build | suite | ASan/UBSan | TSan | survived | killed / run |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total = {k: 0 for k in ("sites", "mutants", "run", *KILL_CLASSES, "survived")}
    for op, row in table.items():
        lines.append(f"| {op} | {row['sites']} | {row['mutants']} | {row['run']} | {row['build']} | {row['suite']} | "
                     f"{row['asan']} | {row['tsan']} | {row['survived']} | {rate(row['run'] - row['survived'], row['run'])} |")
        for k in total:
            total[k] += row[k]
    lines.append(f"| **all** | {total['sites']} | {total['mutants']} | {total['run']} | {total['build']} | "
                 f"{total['suite']} | {total['asan']} | {total['tsan']} | {total['survived']} | "
                 f"{rate(total['run'] - total['survived'], total['run'])} |")
    spent = sum(r.seconds for r in results)
    lines += ["", f"Time in the mutants' runs: {spent / 60:.1f} min on {os.cpu_count()} cores"
              + (f"; wall time of this invocation {wall / 60:.1f} min." if wall > 0 else "."), ""]
    if unrun:
        files = sorted({(m.operator, m.file) for m in unrun})
        lines += [f"Not run ({len(unrun)} mutants): " + ", ".join(f"{op} in {f}" for op, f in files), ""]
    lines += ["Survivors:", ""]
    survivors = [r for r in results if r.killed_by is None]
    if not survivors:
        lines.append("(none)")
    for r in survivors:
        m = r.mutant
        lines.append(f"- `{m.operator}` {m.file}:{m.line} {m.note}".rstrip())
        lines.append(f"  - original: `{m.original_line(originals[m.file])}`")
        lines.append(f"  - mutant:   `{m.describe(originals[m.file])}`")
    lines += ["", "Killed mutants:", "", "| operator | file:line | mutant | killed by | reason | s |",
              "|---|---|---|---|---|---:|"]
    for r in results:
        if r.killed_by is None:
            continue
        m = r.mutant
        mut = m.describe(originals[m.file]).replace("|", "\\|")
        reason = r.reason.replace("|", "\\|").replace("`", "'")
        lines.append(f"| {m.operator} | {m.file}:{m.line} | `{mut}` | {r.killed_by} | {reason[:160]} | {r.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def result_row(r: Result, originals: dict[str, str]) -> dict:
    m = r.mutant
    return {"key": m.key, "operator": m.operator, "file": m.file, "line": m.line, "note": m.note,
            "original": m.original_line(originals[m.file]), "mutant": m.describe(originals[m.file]),
            "killed_by": r.killed_by, "reason": r.reason, "seconds": round(r.seconds, 1), "stages": r.stages}


def dump_json(path: Path, results: list[Result], originals: dict[str, str]) -> None:
    path.write_text(json.dumps([result_row(r, originals) for r in results], indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Operators: " + "; ".join(f"{k}: {v[1]}" for k, v in OPERATORS.items())
        + ". Mutants run operator by operator in the order given, grouped by file.",
    )
    parser.add_argument("--operators", default=",".join(OPERATORS),
                        help="comma-separated operators to run, in this order (default: all)")
    parser.add_argument("--files", default=None,
                        help="comma-separated kernel file names (e.g. kda_chunk.cu): only mutants in these files")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit without running them")
    parser.add_argument("--jobs", type=int, default=1,
                        help="mutants run at once, each with its own mutant and build directory (default 1)")
    parser.add_argument("--report", type=Path, default=None, help="write a markdown report here")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the results here (JSON), updated after every mutant")
    parser.add_argument("--resume", action="store_true",
                        help="with --json: keep the results already in that file and run only the other mutants")
    parser.add_argument("--budget", type=float, default=None,
                        help="start no new mutant after this many minutes (the rest is reported as not run)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kda-mutant"),
                        help="where the mutant and build directories go (default /tmp/kda-mutant)")
    parser.add_argument("--logs", type=Path, default=None, help="keep every run's output in this directory")
    parser.add_argument("--report-only", action="store_true",
                        help="with --json: run nothing, write the summary and --report from the results in that file")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip checking first that the unmutated kernels pass every stage")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="comma-separated runs, in order: plain, address, thread (default: all three)")
    parser.add_argument("--timeout", type=float, default=1.0,
                        help="scale the per-stage time limits (300 / 600 / 900 s) by this factor")
    args = parser.parse_args()

    operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    unknown = [o for o in operators if o not in OPERATORS]
    if unknown:
        parser.error(f"unknown operator(s) {', '.join(unknown)}; known: {', '.join(OPERATORS)}")
    stages = tuple(x.strip() for x in args.stages.split(",") if x.strip())
    if not stages or any(x not in STAGES for x in stages):
        parser.error(f"--stages: expected some of {', '.join(STAGES)}")
    if (args.resume or args.report_only) and not args.json:
        parser.error("--resume and --report-only need --json")
    if args.report_only:
        args.resume = True
    mutants: list[Mutant] = []
    for op in operators:
        mine = OPERATORS[op][0]()
        if args.files:
            files = {f.strip() for f in args.files.split(",")}
            mine = [m for m in mine if m.file in files]
        # Grouped by file, so that consecutive mutants recompile only the module they touch.
        mutants += sorted(mine, key=lambda m: (m.file, m.start, m.replacement))
    originals = {p.name: p.read_text() for p in kernel_files()}

    if args.list:
        for i, m in enumerate(mutants):
            print(f"{i:3d} {m.operator:18s} {m.file}:{m.line}: {m.describe(originals[m.file])}"
                  + (f"   [{m.note}]" if m.note else ""))
        counts = {op: sum(m.operator == op for m in mutants) for op in operators}
        print("mutants: " + ", ".join(f"{op} {n}" for op, n in counts.items()) + f"; total {len(mutants)}")
        return

    if not KDA.exists():
        sys.exit(f"{KDA} is missing: cargo build --release --bin kda-block")
    previous: dict[str, dict] = {}
    if args.resume and args.json.exists():
        previous = {row["key"]: row for row in json.loads(args.json.read_text())}
    by_key = {m.key: m for m in mutants}
    results: list[Result] = [Result(by_key[k], row["killed_by"], row["reason"], row["seconds"],
                                    [tuple(s) for s in row["stages"]])
                             for k, row in previous.items() if k in by_key]
    kept_rows = [row for k, row in previous.items() if k not in by_key]  # other operators' results
    todo = [m for m in mutants if m.key not in previous]
    if args.report_only:
        todo, unrun_first = [], todo
    else:
        unrun_first = []

    timeouts = {k: int(v * args.timeout) for k, v in DEFAULT_TIMEOUTS.items()}
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    workers = [Worker(args.workdir, i, timeouts, stages, args.logs) for i in range(max(1, args.jobs))]
    started = time.monotonic()
    if not args.no_baseline and todo:
        check_baseline(workers[0], todo)

    free = list(workers)
    lock = threading.Lock()
    unrun: list[Mutant] = list(unrun_first)

    def save() -> None:
        if args.json and not args.report_only:
            rows = kept_rows + [result_row(r, originals) for r in results]
            args.json.write_text(json.dumps(rows, indent=1) + "\n")

    def job(i: int) -> Result | None:
        if args.budget is not None and time.monotonic() - started > args.budget * 60:
            return None
        with lock:
            worker = free.pop()
        try:
            return worker.run(todo[i])
        finally:
            with lock:
                free.append(worker)

    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = {pool.submit(job, i): i for i in range(len(todo))}
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            if r is None:
                unrun.append(todo[futures[future]])
                continue
            with lock:
                results.append(r)
            done += 1
            m = r.mutant
            verdict = f"killed by {r.killed_by}" if r.killed_by else "SURVIVED"
            print(f"[{done}/{len(todo)} {(time.monotonic() - started) / 60:5.1f} min] {m.operator} "
                  f"{m.file}:{m.line} `{m.describe(originals[m.file])[:100]}` {verdict} ({r.seconds:.0f} s) "
                  f"{r.reason[:140]}", flush=True)
            save()
    wall = time.monotonic() - started
    order = {m.key: i for i, m in enumerate(mutants)}
    results.sort(key=lambda r: order[r.mutant.key])
    unrun.sort(key=lambda m: order[m.key])
    table = summarise(results, operators, mutants)
    command = "scripts/mutate.py " + " ".join(sys.argv[1:])

    print()
    print(f"{'operator':20s} {'sites':>5s} {'mut':>4s} {'run':>4s} {'build':>5s} {'suite':>5s} {'asan':>5s} "
          f"{'tsan':>5s} {'surv':>5s}")
    for op, row in table.items():
        print(f"{op:20s} {row['sites']:5d} {row['mutants']:4d} {row['run']:4d} {row['build']:5d} {row['suite']:5d} "
              f"{row['asan']:5d} {row['tsan']:5d} {row['survived']:5d}")
    survivors = [r for r in results if r.killed_by is None]
    print(f"\n{len(survivors)} survivor(s):")
    for r in survivors:
        m = r.mutant
        print(f"  {m.operator} {m.file}:{m.line}: {m.describe(originals[m.file])}")
    if unrun:
        print(f"\n{len(unrun)} mutant(s) not run (past --budget, or --report-only)")
    print(f"\nwall time {wall / 60:.1f} min")
    if args.report:
        args.report.write_text(markdown(table, results, originals, 0.0 if args.report_only else wall, command,
                                        unrun))
    save()


if __name__ == "__main__":
    main()
