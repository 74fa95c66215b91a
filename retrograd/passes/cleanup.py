"""The clean-up of generated functions: constant folding, simplification, CSE and dead code removal.

`cleanup_function` is the four passes in a row. A straight-line function of one dataflow block (what
the Gradient pass builds from a dataflow function) is cleaned in one forward walk instead, each binding
folded, simplified and looked up for an equal earlier computation in turn, then one backward walk for
dead code: the four walks and three intermediate functions cost twice the pass that generated them.
"""

from __future__ import annotations

from itertools import islice

import attrs

from retrograd.ir.block import DataflowBlock, VarBinding, new_binding, new_call_binding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import LEAF_CLASSES, LEAF_TYPES, Call, Constant, DataflowVar, Function, Op, SeqExpr, Tuple, TupleGetItem, Var, is_leaf, new_call, new_var
from retrograd.ir.vars import read_vars
from retrograd.passes.cse import CallKeys, eliminate_common_subexpressions
from retrograd.passes.dce import eliminate_dead_code, live_flat_bindings
from retrograd.passes.fold_constant import fold_call, fold_constants
from retrograd.passes.simplify import MATMUL, PERMUTE, Simplifier, simplify_function


def cleanup_function(func: Function, sites: dict | None = None) -> Function:
    """`func` folded, simplified, with repeated computations bound once and dead bindings removed.

    `sites` (from the Gradient pass, see gradient/transposed.py): {var t: TransposedSite}, func binding t and
    m where it would bind p, dwt and dw; t and m are what the clean-up makes of those three.
    The result is the clean-up of func with each site's three bindings put back: the one walk checks each
    site against its state, and takes the three bindings back where it would not have come to t and m."""
    unfused = False
    try:
        fast = _one_walk(func, sites)
    except _Unfused:
        fast, unfused = None, True
    if fast is not None:
        return fast
    if sites:
        func = expand_sites(func, sites)
        if unfused:  # (not when the walk does not take the function: nor will it now)
            fast = _one_walk(func)
            if fast is not None:
                return fast
    func = fold_constants(func)
    func = simplify_function(func)
    func = eliminate_common_subexpressions(func)
    return eliminate_dead_code(func)


_PLAIN, _PERMUTE, _OTHER = "plain", "permute", "other"  # kinds of callee in the one walk


def _is_flat(value) -> bool:
    """A binding value the one-walk clean-up takes: an op call, tuple or projection reading leaves."""
    cls = value.__class__
    if cls is Call:
        if not isinstance(value.op, Op):
            return False
        for a in value.args:
            if a.__class__ is Tuple:
                if not all(isinstance(f, LEAF_TYPES) for f in a.fields):
                    return False
            elif not isinstance(a, LEAF_TYPES):
                return False
        return True
    if cls is Tuple:
        return all(isinstance(f, LEAF_TYPES) for f in value.fields)
    if cls is TupleGetItem:
        return isinstance(value.tuple_value, Var)
    return isinstance(value, LEAF_TYPES)


class TransposedSite:
    """A site of cleanup_function's: the bindings t = permute_dims(g) and m (dw's var bound to matmul(t, a))
    stand for p = permute_dims(a), dwt = matmul(p, g) and dw = permute_dims(dwt), rebuilt from each one's
    var (class, name, struct info) and a call giving its op, attributes and struct info (the Gradient pass
    keeps these, not the bindings, where it never built them)."""

    __slots__ = ("a", "g", "p", "p_call", "dwt", "dwt_call", "dw_call", "m")

    def __init__(self, a, g, p: tuple, p_call: Call, dwt: tuple, dwt_call: Call, dw_call: Call, m: VarBinding):
        self.a, self.g, self.p, self.p_call, self.dwt, self.dwt_call, self.dw_call, self.m = a, g, p, p_call, dwt, dwt_call, dw_call, m

    def bindings(self) -> list:
        """[p, dwt, dw]."""
        pc, dc, wc = self.p_call, self.dwt_call, self.dw_call
        p = new_call_binding(*self.p, pc.op, (self.a,), pc.attrs, pc.struct_info)
        dwt = new_call_binding(*self.dwt, dc.op, (p.var, self.g), dc.attrs, dc.struct_info)
        return [p, dwt, new_binding(self.m.var, new_call(wc.op, (dwt.var,), wc.attrs, wc.struct_info))]


def expand_sites(func: Function, sites: dict) -> Function:
    """`func` with each site's three bindings in place of its two (see cleanup_function): the function the
    clean-up is the clean-up of."""
    seq = func.body
    blocks = tuple(attrs.evolve(block, bindings=_expand(block.bindings, sites)) for block in seq.blocks)
    return attrs.evolve(func, body=attrs.evolve(seq, blocks=blocks), attrs=dict(func.attrs))


def _expand(bindings, sites: dict) -> list:
    out = []
    skip = None
    for b in bindings:
        site = sites.get(b.var)
        if site is not None:
            out += site.bindings()
            skip = site.m
        elif b is not skip:
            out.append(b)
    return out


class _Unfused(Exception):
    """A site of cleanup_function's that the clean-up would not have turned into its two bindings."""


def _one_walk(func: Function, sites: dict | None = None) -> Function | None:
    """The clean-up of a function whose body is one dataflow block of flat bindings, or None when the
    function is not of that form (or needs block outputs demoted): the passes run instead."""
    seq = func.body
    if len(seq.blocks) != 1 or not isinstance(seq.blocks[0], DataflowBlock):
        return None
    bindings = seq.blocks[0].bindings
    walk = _OneWalk(bindings, sites=sites)
    result_reads: list = []
    read_vars(seq.body, result_reads)
    try:
        out = walk.run(bindings, result_reads)
    except _NotFlat:
        return None
    if walk.guessed_wrong():
        # A rewrite took a var to be read once, and a later binding read it: again, with every count known.
        walk = _OneWalk(bindings, walk.counted, sites)
        out = walk.run(bindings, result_reads)
    if walk.var_remap.keys().isdisjoint(result_reads):
        body = seq.body  # the usual case (the result reads output vars, never removed): nothing to resolve
    else:
        body = walk.resolve(seq.body)
        result_reads = []
        read_vars(body, result_reads)
    if not walk.nothing_dead(result_reads):
        out = live_flat_bindings(out, set(result_reads), walk.tuple_args)
        if out is None:
            return None  # the passes demote such outputs to dataflow vars before CSE, which may then merge them
    if not walk.changed and len(out) == len(bindings):
        return func
    new_seq = SeqExpr((DataflowBlock(tuple(out)),) if out else (), body, body.struct_info)
    return attrs.evolve(func, body=new_seq, attrs=dict(func.attrs))


class _Defs:
    """The one walk's `defs` (var -> its value as emitted), read from the binding at its `position`."""

    __slots__ = ("out", "position")

    def __init__(self, out: list, position: dict):
        self.out, self.position = out, position

    def get(self, var, default=None):
        pos = self.position.get(var)
        return default if pos is None else self.out[pos].value

    def __setitem__(self, var, value) -> None:
        pass  # the binding holds the value


class _NotFlat(Exception):
    """A binding the one walk does not take (a call of a function, a value that is not flat)."""


class _OneWalk(Simplifier):
    """fold_constants, simplify and CSE applied to each binding in turn. One table of replacements
    (`var_remap`) serves all three: each pass would substitute the earlier ones' anyway."""

    def __init__(self, bindings, uses: dict | None = None, sites: dict | None = None):
        # Not ExprMutator's builder (see `builder`). The walk counts each var's reads as it goes
        # (`counted`), checking each binding's form on the way (_NotFlat). Without `uses` (every count
        # known), a rewrite that asks whether a var is read once reads the count so far, and
        # `guessed_wrong` says at the end whether a later read changed the answer.
        self.var_remap = {}
        self.counted: dict = {}
        self.init_tables(self.counted if uses is None else uses)
        self.guesses: list | None = [] if uses is None else None  # (var, its count when asked)
        self.bindings = bindings
        self.tuple_args = False  # whether a call reads a tuple: the walk puts none where there was none
        self.out: list = []
        # value key -> the var bound to it, or the dataflow var whose binding an output var took since
        # (`promoted` maps it to that var: read through `_first`)
        self.table: dict = {}
        self.defs = _Defs(self.out, self.position)
        self._normalizer = BlockBuilder()
        self._will_promote: set | None = None  # see outlives
        self.keys = CallKeys()
        self.op_kinds: dict = {}  # op -> _PLAIN, _PERMUTE or _OTHER (see _call_on_leaves)
        self.sites = sites  # see cleanup_function
        # The vars of the sites' bindings p and dwt that the walk of the three bindings would have put in
        # `table`: a binding finding one there would have kept p alive (see transposed_site).
        self.ghosts: set = set()
        self.outputs: list = []  # the output vars emitted, promotions aside (see nothing_dead)
        self.lost: list = []  # vars a rewrite took a read from (see nothing_dead)

    def run(self, bindings, result_reads: list) -> list:
        """The walk over `bindings`; the function's result reads `result_reads` after them."""
        changed = False
        on_leaves, rest, count = self._call_on_leaves, self._visit_rest, self._count_value
        counted, remap, alias, promote, out = self.counted, self.var_remap, self.alias, self.promote, self.out
        for b in bindings:
            old = b.value
            cls = old.__class__
            if cls is Call:
                done = on_leaves(b, b.var, old)  # counts the call's reads
            elif cls is DataflowVar or cls is Var:
                # An alias (each gradient output is one): _count_value and _visit_rest's first step, inline.
                counted[old] = counted.get(old, 0) + 1
                value = remap.get(old, old)
                var = b.var
                if var.__class__ is Var and value.__class__ is DataflowVar:
                    # An output: alias's steps for it, inline.
                    sinfo = var.struct_info
                    if (value.struct_info is sinfo or value.struct_info == sinfo) and promote(var, value, out):
                        changed = True
                        continue
                elif value.__class__ is not Constant and alias(var, value):
                    changed = True
                    continue
                done = None
            else:
                count(old)
                done = None
            changed |= rest(b, b.var, old) if done is None else done
        self._count(result_reads)
        self.changed = self.finish_block() or changed
        return self.out

    def nothing_dead(self, result_reads: list) -> bool:
        """Whether live_flat_bindings would keep all of the output (and not answer None), from the tables: a var
        read before the walk stays read unless a rewrite took the read (`lost`: looked for in later bindings)
        or its reader was removed unread (an alias's readers read its target; CSE's first binding reads what
        the removed did). Then every binding has a reader after it, or is read by the result."""
        if self.tuple_args:
            return False
        counted = self.counted.keys()  # the reads of the walk's input, the result's included
        if not (self.position.keys() <= counted and self.var_remap.keys() <= counted):
            return False
        if not set(self.outputs).union(self.promoted.values()).issubset(result_reads):
            return False
        return all(self._read_later(v, result_reads) for v in dict.fromkeys(self.lost))

    def _read_later(self, var, result_reads: list) -> bool:
        """Whether a binding of the output after var's reads it, or the result does (or var is no binding of it)."""
        var = self.promoted.get(var, var)
        pos = self.position.get(var)
        if pos is None or var in result_reads:
            return True
        reads: list = []
        for b in islice(self.out, pos + 1, None):
            value = b.value
            if value.__class__ is Call:
                if var in value.args:  # (no tuple arguments: see nothing_dead)
                    return True
                continue
            reads.clear()
            read_vars(value, reads)
            if var in reads:
                return True
        return False

    def _took_reads(self, before, after) -> None:
        """Note the vars `before` reads that its rewrite `after` does not (see nothing_dead)."""
        old, new = [], []
        read_vars(before, old)
        read_vars(after, new)
        self.lost += (v for v in old if v not in new)

    def read_once(self, var) -> bool:
        n = self.uses.get(var, 0)
        if self.guesses is not None and n <= 1:
            self.guesses.append((var, n))  # later reads would change the answer
        return n == 1

    def guessed_wrong(self) -> bool:
        counted = self.counted
        return self.guesses is not None and any(counted.get(v, 0) != n for v, n in self.guesses)

    def _count(self, reads) -> None:
        counted = self.counted
        get = counted.get
        for v in reads:
            counted[v] = get(v, 0) + 1

    def _count_value(self, value) -> None:
        """Check and count the reads of a binding value that is not a call."""
        cls = value.__class__
        if cls is DataflowVar or cls is Var:  # an alias
            self.counted[value] = self.counted.get(value, 0) + 1
            return
        if not _is_flat(value):
            raise _NotFlat
        reads: list = []
        read_vars(value, reads)
        self._count(reads)

    def _count_args(self, args, start: int) -> None:
        """Check and count the reads of `args[start:]`, the arguments of an op call."""
        counted = self.counted
        for a in args[start:]:
            cls = a.__class__
            if cls is DataflowVar or cls is Var:
                counted[a] = counted.get(a, 0) + 1
            elif cls is Tuple:
                self.tuple_args = True
                for f in a.fields:
                    if not isinstance(f, LEAF_TYPES):
                        raise _NotFlat
                    if isinstance(f, Var):
                        counted[f] = counted.get(f, 0) + 1
            elif cls not in LEAF_CLASSES:
                raise _NotFlat

    @property
    def builder(self):
        return self  # the simplifier reads `builder.current_bindings()` and `builder.in_dataflow`

    def current_bindings(self) -> list:
        return self.out

    def normalize(self, expr):
        return self._normalizer.normalize(expr)

    in_dataflow = True

    def visit_binding(self, b: VarBinding) -> bool:
        var, old = b.var, b.value
        if old.__class__ is Call:
            done = self._call_on_leaves(b, var, old)
        else:
            self._count_value(old)
            done = None
        return self._visit_rest(b, var, old) if done is None else done

    def _visit_rest(self, b: VarBinding, var, old) -> bool:
        """visit_binding past the calls _call_on_leaves takes."""
        if old.__class__ is DataflowVar or old.__class__ is Var:  # an alias: the steps below, shortened
            value = self.var_remap.get(old, old)
            if value.__class__ is not Constant and self.alias(var, value):
                return True
        value = self.resolve(old)
        # fold_constants
        if value.__class__ is Call:
            folded = fold_call(value)
            if folded is not None:
                self.var_remap[var] = folded
                return True
        elif value.__class__ is Constant:
            self.var_remap[var] = value
            return True
        # simplify
        resolved = value
        value = self.rewrite(var, value)
        if value is not resolved:
            self._took_reads(resolved, value)  # (a projection of a known tuple, a permutation of a permutation...)
        if value.__class__ is not Tuple and is_leaf(value) and self.alias(var, value):
            return True
        # CSE
        key = self.keys.key(value)
        if key is not None:
            first = self._first(key)
            if first is not None and self.ghosts and first in self.ghosts:
                raise _Unfused
            if first is not None and (not self.outlives(var) or self.outlives(first)):
                if first.struct_info == var.struct_info:
                    self.var_remap[var] = first
                    return True
        self.emit(b if value is old else VarBinding(var, value, span=b.span))
        if var.__class__ is Var:
            self.outputs.append(var)
        if key is not None:
            known = self._first(key)
            if known is None or (not self.outlives(known) and self.outlives(var)):
                self.table[key] = var
        return value is not old

    def _call_on_leaves(self, b: VarBinding, var, old: Call):
        """visit_binding for most bindings, without its general steps: a call of an op on leaves of which
        at least one is a variable (so nothing folds). None: not such a call."""
        op = old.op
        kind = self.op_kinds.get(op)
        if kind is None:
            kind = self.op_kinds[op] = (_PERMUTE if op.name == PERMUTE else _PLAIN) if isinstance(op, Op) else _OTHER
        if kind is _OTHER:
            raise _NotFlat  # a call of a function
        remap = self.var_remap
        counted = self.counted
        count = counted.get
        args = old.args
        new = None
        has_var = False
        all_vars = True  # then the CSE key is (head, args): CallKeys.key without its loop
        for i, a in enumerate(args):
            cls = a.__class__
            if cls is DataflowVar or cls is Var:
                counted[a] = count(a, 0) + 1
                to = remap.get(a)
                if to is None:
                    has_var = True
                    continue
                if new is None:
                    new = list(args)
                new[i] = to
                cls = to.__class__
                if cls is DataflowVar or cls is Var:
                    has_var = True
                elif cls is Tuple:
                    self._count_args(args, i + 1)
                    return None
                else:
                    all_vars = False
            elif cls is Tuple:
                self._count_args(args, i)
                return None
            elif cls in LEAF_CLASSES:
                all_vars = False
            else:
                raise _NotFlat
        if not has_var:
            if self.sites and var in self.sites:
                raise _Unfused  # a site's g replaced by a constant: t would fold, emit_transpose's does not
            return None
        value = old if new is None else new_call(op, tuple(new), old.attrs, old.struct_info, old.span)
        if kind is _PERMUTE:  # the one simplify pattern of calls on leaves (see Simplifier.rewrite)
            if self.sites:
                site = self.sites.get(var)
                if site is not None:
                    return self.transposed_site(b, var, old, value, site)
            before = value
            value = self.permute(var, value)
            if value is not before:
                self._took_reads(before, value)
            if value.__class__ is not Call and is_leaf(value) and self.alias(var, value):
                return True
            key = self.keys.key(value)  # the rewrite may have changed the op, attributes and arguments
        else:  # CallKeys.key without a call (nor, for arguments that are all vars, its loop over them)
            attrs = old.attrs
            hit = self.keys.heads.get(id(attrs))  # _head, inline
            head = hit[2] if hit is not None and hit[0] is attrs and hit[1] is op else self.keys.head(op, attrs)
            key = None if head is None else (head, value.args if all_vars else self.keys.arg_keys(value.args))
        first = None
        if key is not None:
            # One lookup: the key goes in with this var where it is new (most calls), as it would below.
            first = self.table.setdefault(key, var)
            if first is var:
                first = None
            else:
                first = self.promoted.get(first, first)  # _first
                if self.ghosts and first in self.ghosts:
                    raise _Unfused
                if not self.outlives(var) or self.outlives(first):
                    if first.struct_info is var.struct_info or first.struct_info == var.struct_info:
                        remap[var] = first
                        return True
        out = self.out
        self.position[var] = len(out)  # (and `defs`, which reads the binding there)
        out.append(b if value is old else new_binding(var, value, b.span))
        if var.__class__ is Var:
            self.outputs.append(var)
        # (the table is as it was: `first` is still the representative of the key)
        if first is not None and not self.outlives(first) and self.outlives(var):
            self.table[key] = var
        return value is not old

    def transposed_site(self, b: VarBinding, var, old: Call, value: Call, site: tuple) -> bool:
        """_call_on_leaves of a site's transpose t = permute_dims(g) (see cleanup_function), its reads counted:
        what the walk of p = permute_dims(a), dwt = matmul(p, g) and dw = permute_dims(dwt) would have done
        in its place. That walk leaves p as it is, adds p and dwt to the table, and rewrites dw by
        matmul_transpose, which emits t (as emit_transpose: looked up in the table, not simplified) and
        makes dw matmul(t, a): the site's m, walked next. Raises _Unfused where that walk would have gone
        otherwise (rare forms, which the checks below keep to simple conditions)."""
        a, g = site.a, value.args[0]
        a = self.var_remap.get(a, a)
        if a.__class__ is not DataflowVar and a.__class__ is not Var or g.__class__ is not DataflowVar and g.__class__ is not Var:
            raise _Unfused  # replaced by a constant: p would fold, t would not have
        # p's walk: permute would compose a permute_dims, or ask whether a matmul's var is read once (which
        # must answer no, p reading it too, and record no guess). dw's: a transposed g would be used as is.
        defs = self.defs
        d = defs.get(a)
        if d.__class__ is Call:
            name = getattr(d.op, "name", None)
            reads = self.uses.get(a, 0) + (self.guesses is not None and a is site.a)  # p's read
            if name == PERMUTE or name == MATMUL and reads < 2:
                raise _Unfused
        d = defs.get(g)
        if d.__class__ is Call and getattr(d.op, "name", None) == PERMUTE and self.permutation(d)[2]:
            raise _Unfused  # (transposed_source)
        p, _ = self._ghost(site.p_call, site.p, (a,))
        if not self._ghost(site.dwt_call, site.dwt, (p, g))[1]:
            raise _Unfused  # dwt would have been replaced by an earlier equal matmul
        # t as emit_transpose emits it
        key = (self._head(value), (g,))
        first = self._first(key)
        if first is not None:
            if first in self.ghosts:
                raise _Unfused
            if first.struct_info == var.struct_info:
                self.var_remap[var] = first
                return True
        out = self.out
        self.position[var] = len(out)
        out.append(b if value is old else new_binding(var, value, b.span))
        if var.__class__ is Var:
            self.outputs.append(var)
        self.table[key] = var
        return value is not old

    def _head(self, call: Call):
        """The head of a call's key (CallKeys.key's first step)."""
        op, attrs = call.op, call.attrs
        hit = self.keys.heads.get(id(attrs))
        return hit[2] if hit is not None and hit[0] is attrs and hit[1] is op else self.keys.head(op, attrs)

    def _ghost(self, call: Call, var: tuple, args: tuple) -> tuple:
        """(the var standing for a site's binding p or dwt after the CSE step of its walk, whether it is the
        binding's own): an earlier equal one, or a new var (class, name, struct info `var`), put in the table
        as a ghost where nothing was (else that walk would have emitted it, dead: only dwt reads p)."""
        key = (self._head(call), args)
        first = self._first(key)
        sinfo = var[2]
        if first is not None and (first.struct_info is sinfo or first.struct_info == sinfo):
            return first, False
        own = new_var(*var)
        if first is None:
            self.table[key] = own
            self.ghosts.add(own)
        return own, True

    def finish_block(self) -> bool:
        promoted = self.promoted
        if not promoted:
            return False
        # A binding after a promoted var's position reads it only if some binding read it before the clean-up
        # (other than the alias that promoted it) or if a removed var now stands for it: every var a rewritten
        # value reads was read by the value it comes from or is a replacement (var_remap). Outputs of
        # gradients are usually read by their alias alone; then there is nothing to rename.
        uses = self.uses
        if all(uses.get(t, 0) <= 1 for t in promoted) and promoted.keys().isdisjoint(self.var_remap.values()):
            return True
        return super().finish_block()

    def outlives(self, var) -> bool:
        """An output var, or a dataflow var an output var takes the binding of later in the block: CSE
        runs after simplify's promotions in the passes, and sees these as output vars."""
        if var.__class__ is not DataflowVar:
            return True
        promote = self._will_promote
        if promote is None:  # asked only when two bindings compute the same value: found then
            promote = self._will_promote = {
                b.value for b in self.bindings if b.value.__class__ is DataflowVar and b.var.__class__ is Var
            }
        return var in promote

    def _first(self, key):
        """The var representing `key`'s value (None: none yet): the table's, or the output var that took its
        binding since."""
        first = self.table.get(key)
        return first if first is None else self.promoted.get(first, first)

    def emit_transpose(self, x):
        var = super().emit_transpose(x)
        # The passes would look the new transpose up in CSE after simplifying.
        b = self.out[-1]
        key = self.keys.key(b.value)
        first = self._first(key) if key is not None else None
        if first is not None and self.ghosts and first in self.ghosts:
            raise _Unfused
        if first is not None and first.struct_info == var.struct_info:
            self.out.pop()
            del self.position[var]
            return first
        if key is not None:
            self.table[key] = var
        return var
