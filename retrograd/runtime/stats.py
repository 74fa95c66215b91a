"""What a call measured: peak live bytes always; per-op time, calls and output bytes when profiling."""

from __future__ import annotations

import attrs

from retrograd.analysis.memory import human_bytes  # noqa: F401  (re-exported: the profile table's unit)


@attrs.frozen
class RunStats:
    """Measurements of the last call of a built function.

    peak_live_bytes: the most bytes held at once by the distinct buffers of live values (parameters
    for the whole call; intermediates from production to last use; a view counts the buffer it views,
    once; constants excluded). docs/memory.md states the exact rule; retrograd.analysis predicts it.
    param_bytes: the bytes of the parameters' buffers (included in the peak).
    """

    function: str
    peak_live_bytes: int
    param_bytes: int

    @property
    def peak_intermediate_bytes(self) -> int:
        return self.peak_live_bytes - self.param_bytes


def format_profile(prof: dict) -> str:
    """A table of per-op totals, most expensive first."""
    rows = sorted(prof.items(), key=lambda kv: -kv[1][1])
    total = sum(rec[1] for _, rec in rows)
    width = max([len("op")] + [len(k) for k, _ in rows])
    lines = [f"{'op':<{width}}  {'calls':>7}  {'total ms':>10}  {'mean us':>9}  {'%':>6}  {'output':>10}"]
    for key, (calls, secs, nbytes) in rows:
        share = secs / total * 100 if total else 0.0
        lines.append(
            f"{key:<{width}}  {calls:>7}  {secs * 1e3:>10.3f}  {secs / calls * 1e6:>9.2f}  "
            f"{share:>6.1f}  {human_bytes(nbytes):>10}"
        )
    calls = sum(rec[0] for _, rec in rows)
    lines.append(f"{'total':<{width}}  {calls:>7}  {total * 1e3:>10.3f}")
    return "\n".join(lines)
