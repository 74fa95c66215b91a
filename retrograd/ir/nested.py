"""Walks of nested trees (tuple expressions, tuple struct infos, tuple values) with explicit stacks.

A tuple may nest thousands deep: recursion would pass Python's recursion limit, and raising the limit
risks the C stack where the recursion goes through C (attrs' __eq__, tuple hashing, all(genexpr)).
"""

from __future__ import annotations


def fold(root, children, combine, shared: bool = True, memo: dict | None = None):
    """Bottom-up: `combine(node, results)` with the results of `children(node)` (empty at a leaf), in
    order; the root's result. With `shared`, a node reached twice (a DAG) is combined once (keyed by
    id: the nodes must stay alive, so not for pairs made on the fly); `memo` keeps those results
    across calls (the caller keeps the nodes alive)."""
    done: dict = {} if memo is None else memo
    results: list = []
    stack = [(root, None)]
    while stack:
        node, kids = stack.pop()
        if kids is None:
            if shared and id(node) in done:
                results.append(done[id(node)])
                continue
            kids = children(node)
            if kids:
                stack.append((node, kids))
                stack.extend((k, None) for k in reversed(kids))
                continue
            out = combine(node, ())
        else:
            n = len(kids)
            out = combine(node, results[-n:])
            del results[-n:]
        if shared:
            done[id(node)] = out
        results.append(out)
    return results[0]


def all_pairs(a, b, step) -> bool:
    """True when `step(x, y)` holds for every pair reached from (a, b), depth first in order: step
    returns True or False, or the list of child pairs still to check."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        r = step(x, y)
        if r is True:
            continue
        if r is False:
            return False
        stack.extend(reversed(r))
    return True


def preorder(root, children):
    """Every node under `root` (repeats included), parents first, children in order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        kids = children(node)
        if kids:
            stack.extend(reversed(kids))


def render(root, parts) -> str:
    """Text of a tree: `parts(node)` lists strings and child nodes (anything not a str) in order."""
    out: list[str] = []
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        else:
            stack.extend(reversed(parts(item)))
    return "".join(out)


def joined(items, sep: str = ", ") -> list:
    """`items` with `sep` between them, as a list of parts for `render`."""
    out: list = []
    for i, x in enumerate(items):
        if i:
            out.append(sep)
        out.append(x)
    return out


def depth(root, children) -> int:
    """How many levels `root` nests (1 for a leaf)."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        kids = children(node)
        if kids:
            stack.extend((k, d + 1) for k in kids)
    return deepest


def postorder(root, children):
    """Every node under `root` once (a node reached twice is yielded the first time), children first."""
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            yield node
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            kids = children(node)
            if kids:
                stack.extend((k, False) for k in reversed(kids))


def tuple_leaves(value):
    """The values that are not tuples in a nest of Python tuples (a runtime value, a register source),
    in order; a value that is not a tuple is its own only leaf."""
    if type(value) is not tuple:
        yield value
        return
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is tuple:
            stack.extend(reversed(v))
        else:
            yield v


def trampoline(gen):
    """Run a generator that yields sub-generators for nested work and receives their results:
    recursion without Python frames (deep nests never reach the recursion limit), in the order the
    recursive code would run (a pass's emitted bindings keep their order)."""
    stack, value = [gen], None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        stack.append(sub)
        value = None
