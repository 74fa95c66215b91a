"""The executor's memory rule applied to a Problem and a Schedule: peak live bytes, extra cost, validity.

The rule is retrograd.runtime.interp's: parameters (pinned_bytes) are live for the whole call; an
instance is live from its computation to its last use (outputs: to the end; unused: freed right
after it is computed); the peak is taken after a node's result is stored and before its dying inputs
are released, with what the node holds inside (Problem.inner); an alias counts its root buffer once, for as long as any holder lives; an in-place node
(runtime/inplace.py) reuses the buffer of the first of its in-place deps that dies there, when that
dep owns its buffer, of the result's size, and no other live value holds it.
"""

from __future__ import annotations

import attrs

from retrograd.passes.checkpoint.problem import Problem, Schedule


@attrs.frozen
class Simulation:
    peak_bytes: int = 0
    extra_cost: float = 0.0
    recomputed_count: int = 0
    valid: bool = True
    error: str | None = None
    peak_stage: int = -1  # stage whose events reach the peak (-1: parameters alone)
    stage_peaks: tuple = ()  # per stage, the most bytes live during its events (when asked for)

    def check(self) -> Simulation:
        if not self.valid:
            raise ValueError(f"invalid schedule: {self.error}")
        return self


def _invalid(msg: str) -> Simulation:
    return Simulation(valid=False, error=msg)


def events(problem: Problem, schedule: Schedule | None, check: bool = True):
    """(nodes, stages, reads, last_use) of the schedule's computations in order, or an error message.

    reads[e]: the event index of the instance read for each dep of event e; last_use[e]: the last
    event reading instance e (e itself when unread, len(nodes) for a final output instance).
    """
    p = problem
    n = p.n
    rec = schedule.recompute if schedule is not None else ()
    if len(rec) > n:
        return f"the schedule has {len(rec)} stages, the problem {n}"
    deps = p.deps
    names = p.names
    recomputable = p.recomputable
    cur = [-1] * n
    nodes: list[int] = []
    stages: list[int] = []
    reads: list[tuple] = []
    last_use: list[int] = []
    e = 0
    for t in range(n):
        extra = rec[t] if t < len(rec) else ()
        if extra and check:
            seen: dict[int, int] = {}
            for k, v in enumerate(extra):
                if not 0 <= v < t:
                    what = "is not a node" if not 0 <= v < n else "is not computed yet"
                    return f"stage {t}: recomputed node #{v} {what} (only nodes before stage {t} can be recomputed)"
                if not recomputable[v]:
                    return f"stage {t}: node {names[v]} (#{v}) is not recomputable"
                if v in seen:
                    return f"stage {t}: node {names[v]} (#{v}) is recomputed twice"
                seen[v] = k
            for k, v in enumerate(extra):
                for d in deps[v]:
                    if seen.get(d, -1) > k:
                        return (
                            f"stage {t}: recomputations out of order: {names[v]} (#{v}) reads {names[d]} (#{d}), "
                            f"which is recomputed after it"
                        )
        for v in extra + (t,) if extra else (t,):
            r = [cur[d] for d in deps[v]]
            for i in r:
                last_use[i] = e
            nodes.append(v)
            stages.append(t)
            reads.append(r)
            last_use.append(e)
            cur[v] = e
            e += 1
    end = len(nodes)
    for o in p.outputs:
        last_use[cur[o]] = end
    return nodes, stages, reads, last_use


def simulate(problem: Problem, schedule: Schedule | None = None, stage_peaks: bool = False, check: bool = True) -> Simulation:
    """Peak live bytes (parameters included), extra cost and validity of running `problem` with `schedule`.

    check=False skips the validity checks, for schedules built valid by the solvers.
    """
    ev = events(problem, schedule, check)
    if isinstance(ev, str):
        return _invalid(ev)
    nodes, stages, reads, last_use = ev
    p = problem
    sizes = p.sizes
    alias_of = p.alias_of
    inplace = p.inplace
    deps = p.deps
    costs = p.costs
    inner = p.inner
    m = len(nodes)
    group_last = {}  # (stage, instance) -> the last recomputation of that stage's group reading it
    for e in range(m):
        if stages[e] != nodes[e]:
            for i in reads[e]:
                group_last[stages[e], i] = e
    buf = [0] * m  # the event whose buffer the instance uses
    refs = [0] * m  # per buffer (indexed by its owning event): live instances holding it
    nbytes = [0] * m
    # A tuple's buffer: holders of the whole tuple, and of each field; its bytes are its held fields'.
    fields, field = p.fields, p.field
    whole: dict[int, int] = {}
    parts: dict[int, list] = {}
    fld: list = [None] * m  # per instance: the field of a tuple buffer it holds (None: all, or no tuple)

    def hold(k, f, d):
        """Bytes newly live (or freed, negative) when a holder of field f (None: all) of tuple buffer k
        comes (d = 1) or goes (d = -1)."""
        sizes_k = fields[nodes[k]]
        before = sum(sz for sz, c in zip(sizes_k, parts[k]) if c or whole[k])
        if f is None:
            whole[k] += d
        else:
            parts[k][f] += d
        return sum(sz for sz, c in zip(sizes_k, parts[k]) if c or whole[k]) - before

    cur = peak = p.pinned_bytes
    peak_stage = -1
    per_stage = [0] * p.n if stage_peaks else None
    extra = 0.0
    n_extra = 0
    def release(i) -> int:
        """Bytes freed when instance i dies."""
        k = buf[i]
        refs[k] -= 1
        if k not in whole:
            return nbytes[k] if refs[k] == 0 else 0
        return -hold(k, fld[i], -1)

    for e in range(m):
        v = nodes[e]
        r = reads[e]
        a = alias_of[v]
        b = e
        if a is not None:
            b = buf[r[deps[v].index(a)]]
            fld[e] = field[v]
        else:
            recomputed = stages[e] != v
            for pos in inplace[v]:
                i = r[pos]
                # The executor tries the first candidate whose register dies here only. A recomputation
                # reads a value from outside its group through a marker of the group (rewrite.py), whose
                # register dies at the group's last read of it even when the value lives on.
                outside = recomputed and (stages[i] != stages[e] or stages[i] == nodes[i])
                if (group_last[stages[e], i] if outside else last_use[i]) == e:
                    k = buf[i]
                    # Written over when nothing else holds the buffer (a view keeps the whole buffer).
                    if k in whole:  # a tuple's field
                        f = fld[i]
                        if last_use[i] == e and f is not None and not whole[k] and parts[k][f] == 1 and sizes[v] > 0:
                            b, fld[e] = k, f
                    elif last_use[i] == e and refs[k] == 1 and sizes[v] > 0 and (alias_of[nodes[i]] is not None or nbytes[k] == sizes[v]):
                        b = k
                    break
        if b == e:
            nbytes[e] = s = sizes[v]
            refs[e] = 1
            if fields[v]:
                whole[e], parts[e] = 1, [0] * len(fields[v])
            cur += s
        else:
            refs[b] += 1
            if b in whole:
                cur += hold(b, fld[e], 1)
        buf[e] = b
        top = cur + inner[v]
        if top > peak:
            peak = top
            peak_stage = stages[e]
        if per_stage is not None and top > per_stage[stages[e]]:
            per_stage[stages[e]] = top
        if stages[e] != v:
            extra += costs[v]
            n_extra += 1
        for i in r:
            if last_use[i] == e:
                last_use[i] = -1  # released once even when read twice
                cur -= release(i)
        if last_use[e] == e:
            cur -= release(e)
    return Simulation(
        peak_bytes=peak,
        extra_cost=extra,
        recomputed_count=n_extra,
        peak_stage=peak_stage,
        stage_peaks=tuple(per_stage) if per_stage is not None else (),
    )
