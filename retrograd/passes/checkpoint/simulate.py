"""The executor's memory rule (runtime/interp.py) on a Problem and a Schedule: peak live bytes, extra cost, validity.

Parameters (pinned_bytes) live for the whole call; an instance from its computation to its last use (outputs:
the end); the peak is taken after a node's result is stored and before its dying inputs go, with what the node
holds inside (Problem.inner); aliases and in-place reuse as Problem says. The exact memory model
(analysis/memory.py) measures the same on every corpus and benchmark function (test_ckpt_model_equals_exact.py)."""

from __future__ import annotations

from itertools import compress, count
from operator import ne

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


MARK = 1024  # the least number of events between two marks (a mark's lists cost O(n) to copy)


def events(problem: Problem, schedule: Schedule | None, check: bool = True, base=None, marks: list | None = None):
    """(nodes, stages, reads, last_use) of the schedule's computations in order, or an error message.
    reads[e]: the event index of the instance read for each dep of event e; last_use[e]: the last event
    reading instance e (e itself when unread, len(nodes) for a final output instance). marks: filled with
    [stage, event, the loop's state, simulate's] every len(nodes)/16 events; base: (another schedule, its events, its
    marks): its events before the first stage t0 the two differ at are taken, replayed from its last mark
    before t0 (simulate's kept up to the first event whose run can differ: an instance's last use changes)."""
    p, n = problem, problem.n
    rec = schedule.recompute if schedule is not None else ()
    if len(rec) > n:
        return f"the schedule has {len(rec)} stages, the problem {n}"
    deps, cur, t0, nodes, stages, reads, last_use, kept = p.deps, [-1] * n, 0, [], [], [], [], []
    gap = max(MARK, (n + sum(map(len, rec))) // 16)  # of the len(nodes) events
    if base is not None:
        old, (nodes, stages, reads, old_last), old_marks = base
        t0 = next(compress(count(), map(ne, rec, old.recompute)), min(len(rec), len(old.recompute)))
        e0 = t0 + sum(map(len, rec[:t0]))
        kept = [[*mk] for mk in old_marks if mk[0] <= t0]
        _, e, cur, last_use = kept[-1][:4] if kept else (0, 0, cur, last_use)
        cur, last_use = list(cur), last_use + list(range(e, e0))
        nodes, stages, reads = nodes[:e0], stages[:e0], reads[:e0]
        for e in range(e, e0):
            cur[nodes[e]] = e
            for i in reads[e]:
                last_use[i] = e
    if marks is not None:
        marks[:] = kept
    e, nxt, get = len(nodes), (kept[-1][1] if kept else 0) + gap if marks is not None else -1, cur.__getitem__
    for t in range(t0, n):
        extra = rec[t] if t < len(rec) else ()
        later: set[int] = set()  # why the recomputations before stage t are not valid, when they are not
        for v in reversed(extra) if check and extra else ():
            if not 0 <= v < t:
                why = "is not a node" if not 0 <= v < n else "is not computed yet"
                return f"stage {t}: recomputed node #{v} {why} (only nodes before stage {t} can be recomputed)"
            if not p.recomputable[v] or v in later:
                why = "recomputed twice" if v in later else "not recomputable"
                return f"stage {t}: node {p.names[v]} (#{v}) is {why}"
            if (d := next((d for d in p.deps[v] if d in later), None)) is not None:
                return (f"stage {t}: recomputations out of order: {p.names[v]} (#{v}) reads {p.names[d]} (#{d}), which "
                        "is recomputed after it")
            later.add(v)
        if e >= nxt >= 0:
            marks.append([t, e, cur[:], last_use[:], False])
            nxt = e + gap
        for v in extra + (t,) if extra else (t,):
            r = list(map(get, deps[v]))
            for i in r:
                last_use[i] = e
            nodes.append(v)
            stages.append(t)
            reads.append(r)
            last_use.append(e)
            cur[v] = e
            e += 1
    for o in p.outputs:
        last_use[cur[o]] = e
    if kept:
        differ = list(map(ne, old_last, last_use[:e0]))
        same = min([e0, *map(min, compress(old_last, differ), compress(last_use, differ))])
        for mk in kept:  # None: simulate saves its state; False (made by this call): not yet, from the next on
            mk[4] = mk[4] if mk[4] and mk[1] <= same else None
    return nodes, stages, reads, last_use


def simulate(problem: Problem, schedule: Schedule | None = None, stage_peaks: bool = False, check: bool = True, ev=None,
             marks: list | None = None) -> Simulation:
    """Peak live bytes (parameters included), extra cost and validity of running `problem` with `schedule`.
    check=False skips the validity checks, for schedules built valid by the solvers; ev: the schedule's events
    when made already; marks: their marks (events()), whose states the run resumes from (the last saved) and saves."""
    ev = ev or events(problem, schedule, check)
    if isinstance(ev, str):
        return Simulation(valid=False, error=ev)
    nodes, stages, reads, last_use = ev
    p, m, last_use, marks = problem, len(nodes), list(last_use), [] if stage_peaks or marks is None else marks
    sizes, alias_of, inplace, deps, fields, field, inner = p.sizes, p.alias_of, p.inplace, p.deps, p.fields, p.field, p.inner
    # Per instance: the event whose buffer it uses, the field of a tuple buffer it holds (None: all, or no tuple).
    # Per buffer (its owning event): live instances holding it, bytes; a tuple's, per field, the live instances
    # holding the whole tuple or that field (its bytes are its held fields').
    buf, fld, refs, nbytes, held = [0] * m, [None] * m, [0] * m, [0] * m, {}
    cur = peak = p.pinned_bytes
    start, peak_stage, extra, per_stage, group_last = 0, -1, 0.0, [0] * p.n if stage_peaks else None, {}
    at = [mk for mk in marks if mk[4]]
    if at:  # resumed: the lists' entries before `start` hold from the saved run on
        start, (cur, peak, peak_stage, extra, refs, held, buf, fld, nbytes) = at[-1][1], at[-1][4]
        refs, held = refs + [0] * (m - start), {k: c[:] for k, c in held.items()}
        buf, fld, nbytes = (x[:start] + [d] * (m - start) for x, d in ((buf, 0), (fld, None), (nbytes, 0)))
    todo = iter([mk for mk in marks if mk[1] > start and mk[4] is None] + [[0, -1]])
    mark = next(todo)

    def hold(k, f, d):
        """Bytes newly live (or freed, negative) when a holder of field f (None: all) of tuple buffer k comes (d = 1) or goes (d = -1)."""
        counts, delta = held[k], 0
        for j in range(len(counts)) if f is None else (f,):
            counts[j] += d
            delta += d * fields[nodes[k]][j] if counts[j] == (d > 0) else 0
        return delta

    for e, v, s, r in zip(range(start, m), nodes[start:], stages[start:], reads[start:]):
        if e == mark[1]:
            mark[4] = (cur, peak, peak_stage, extra, refs[:e], {k: c[:] for k, c in held.items()}, buf, fld, nbytes)
            mark = next(todo)
        b = e
        if alias_of[v] is not None:
            b, fld[e] = buf[r[deps[v].index(alias_of[v])]], field[v]
        for pos in inplace[v] if alias_of[v] is None else ():
            i = r[pos]
            # The executor tries the first candidate whose register dies here only. A recomputation
            # reads a value from outside its group through a marker of the group (rewrite.py), whose
            # register dies at the group's last read of it even when the value lives on.
            if s != v and (stages[i] != s or stages[i] == nodes[i]):
                if s not in group_last:  # the last read of each instance by s's recomputations from e on
                    j, group_last[s] = e, {}
                    while nodes[j] != s:
                        group_last[s].update(dict.fromkeys(reads[j], j))
                        j += 1
                dies = group_last[s][i] == e
            else:
                dies = last_use[i] == e
            if dies:
                k, f = buf[i], fld[i]
                # Written over when nothing else holds the buffer (a view keeps the whole buffer).
                if k in held:  # a tuple's field, held by i alone
                    if last_use[i] == e and f is not None and held[k][f] == 1 and sizes[v] > 0:
                        b, fld[e] = k, f
                elif last_use[i] == e and refs[k] == 1 and sizes[v] > 0 and (alias_of[nodes[i]] is not None or nbytes[k] == sizes[v]):
                    b = k
                break
        if b == e:
            nbytes[e], refs[e], cur = sizes[v], 1, cur + sizes[v]
            if fields[v]:
                held[e] = [1] * len(fields[v])
        else:
            refs[b] += 1
            cur += hold(b, fld[e], 1) if b in held else 0
        buf[e], top = b, cur + inner[v]
        if top > peak:
            peak, peak_stage = top, s
        if per_stage is not None and top > per_stage[s]:
            per_stage[s] = top
        if s != v:
            extra += p.costs[v]
        for i in r if last_use[e] != e else (*r, e):  # the instances dying here (e: when unread)
            if last_use[i] == e:
                last_use[i], k = -1, buf[i]  # released once even when read twice
                refs[k] -= 1
                cur -= -hold(k, fld[i], -1) if k in held else nbytes[k] if refs[k] == 0 else 0
    return Simulation(peak, extra, m - p.n, peak_stage=peak_stage, stage_peaks=tuple(per_stage or ()))
