"""The memory timeline as a picture: live bytes over a function's run, as written and as planned.

The curves are the exact memory model's (`retrograd.analysis.memory_timeline`): what the executor's
meter (`ex.stats.peak_live_bytes`) reads while the function runs, binding by binding. With a budget,
the checkpoint pass plans the function and the planned curve is the rewritten function's timeline.
matplotlib draws the static picture (PNG, SVG, PDF), plotly the interactive one (HTML); both optional.
"""

from __future__ import annotations

import attrs

from retrograd.analysis import MemoryTimeline, live_at_peak, memory_timeline
from retrograd.errors import UnsupportedError
from retrograd.analysis.memory import human_bytes

# Values listed beside the picture at each peak; the rest are counted.
LISTED = 8


@attrs.frozen
class MemoryCurve:
    """One curve: the timeline of a function and the values live at its peak (name, bytes), largest first."""

    label: str
    timeline: MemoryTimeline
    live: tuple[tuple[str, int], ...]

    @property
    def steps(self) -> list[int]:
        """The x of each point: the binding's position in the run (0 is the first binding)."""
        return list(range(len(self.timeline.during)))

    @property
    def peak_step(self) -> int:
        """Where the peak is marked: the first binding reaching it (0 when the parameters alone are the peak)."""
        index = self.timeline.peak_index
        return 0 if index is None else index


@attrs.frozen
class MemoryCurves:
    """What the picture shows: the function as written, as planned for `budget` bytes (when given)."""

    function: str
    unplanned: MemoryCurve
    planned: MemoryCurve | None
    budget: int | None

    @property
    def curves(self) -> list[MemoryCurve]:
        return [c for c in (self.unplanned, self.planned) if c is not None]


def memory_curves(mod, func: str, budget=None) -> MemoryCurves:
    """The data of the picture. `budget`: bytes or text as the checkpoint pass takes it ("40%", "12MiB")."""
    from retrograd.passes.checkpoint import plan_checkpoint

    unplanned = _curve(mod, func, "unplanned")
    if budget is None:
        return MemoryCurves(func, unplanned, None, None)
    planned_mod, report = plan_checkpoint(mod, func, budget)
    planned = _curve(planned_mod, func, f"planned for {human_bytes(report.budget)}")
    return MemoryCurves(func, unplanned, planned, report.budget)


def _curve(mod, func: str, label: str) -> MemoryCurve:
    return MemoryCurve(label, memory_timeline(mod, func), live_at_peak(mod, func))


def _need(module: str, extra: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise UnsupportedError(
            f"the memory picture needs {module.split('.')[0]}: pip install {module.split('.')[0]} "
            f'(or pip install "retrograd[{extra}]")'
        ) from None


def _tick(top: float) -> int:
    """A tick step in whole binary units (1, 2, 5, 10, ... KiB or MiB) giving at most 8 ticks up to `top`."""
    unit = 1
    while unit * 1024 <= top and unit < 1 << 30:
        unit *= 1024
    step = unit
    for nice in (1, 2, 5, 10, 20, 50, 100, 200, 500):
        step = unit * nice
        if top / step <= 8:
            break
    return step


def _live_text(curve: MemoryCurve) -> str:
    lines = [f"{curve.label}:", f"live at its peak ({human_bytes(curve.timeline.peak)})"]
    for name, nbytes in curve.live[:LISTED]:
        lines.append(f"  {name}  {human_bytes(nbytes)}")
    rest = curve.live[LISTED:]
    if rest:
        lines.append(f"  and {len(rest)} more ({human_bytes(sum(n for _, n in rest))})")
    return "\n".join(lines)


def memory_figure(mod, func: str, budget=None, curves: MemoryCurves | None = None):
    """A matplotlib Figure of the memory timeline of `func` (see memory_curves); save it with `fig.savefig(path)`.

    Each curve is drawn with one point per binding (its `during` bytes, so the curve's top is the
    peak), the peaks marked, the budget and the parameters' bytes as horizontal lines, and beside it
    the values live at each peak by name and size.
    """
    figure = _need("matplotlib.figure", "plot")
    ticker = _need("matplotlib.ticker", "plot")
    data = curves if curves is not None else memory_curves(mod, func, budget)
    fig = figure.Figure(figsize=(10, 4.8), layout="constrained")
    ax, side = fig.subplots(1, 2, width_ratios=[3, 1.15])
    colors = ("tab:blue", "tab:green")
    for curve, color in zip(data.curves, colors):
        t = curve.timeline
        ax.plot(curve.steps, list(t.during), color=color, drawstyle="steps-post", linewidth=1.4,
                label=f"{curve.label} (peak {human_bytes(t.peak)})", gid=f"curve:{curve.label}")
        ax.plot([curve.peak_step], [t.peak], marker="v", markersize=9, color=color, linestyle="none",
                gid=f"peak:{curve.label}")
        ax.annotate(f"peak {human_bytes(t.peak)} at {t.peak_name or 'the parameters'}", (curve.peak_step, t.peak), textcoords="offset points",
                    xytext=(4, 8), color=color, fontsize=8)
    params = data.unplanned.timeline.param_bytes
    ax.axhline(params, color="grey", linestyle=":", linewidth=1, label=f"parameters ({human_bytes(params)})", gid="params")
    if data.budget is not None:
        ax.axhline(data.budget, color="tab:red", linestyle="--", linewidth=1.2,
                   label=f"budget ({human_bytes(data.budget)})", gid="budget")
    top = max(c.timeline.peak for c in data.curves) * 1.12 or 1
    ax.set_ylim(bottom=0, top=top)
    ax.yaxis.set_major_locator(ticker.MultipleLocator(_tick(top)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: human_bytes(int(v)) if v >= 0 else ""))
    ax.set_xlabel("binding, in the order the executor runs them")
    ax.set_ylabel("live bytes")
    ax.set_title(f"memory timeline of {data.function}")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    side.axis("off")
    side.text(0, 1, "\n\n".join(_live_text(c) for c in data.curves), va="top", ha="left", family="monospace",
              fontsize=7, transform=side.transAxes)
    return fig


def memory_html(mod, func: str, budget=None, curves: MemoryCurves | None = None) -> str:
    """A self-contained HTML page of the timeline (plotly): hovering a point shows the binding and its bytes."""
    go = _need("plotly.graph_objects", "plot")
    data = curves if curves is not None else memory_curves(mod, func, budget)
    fig = go.Figure()
    for curve in data.curves:
        t = curve.timeline
        hover = [f"{name}<br>{human_bytes(d)} live while it runs<br>{human_bytes(a)} after"
                 for name, d, a in zip(t.names, t.during, t.after)]
        fig.add_trace(go.Scatter(x=curve.steps, y=list(t.during), mode="lines", line_shape="hv", name=curve.label,
                                 hovertext=hover, hoverinfo="text"))
        live = "<br>".join(f"{name}: {human_bytes(n)}" for name, n in curve.live[:LISTED])
        fig.add_trace(go.Scatter(x=[curve.peak_step], y=[t.peak], mode="markers", marker_symbol="triangle-down",
                                 marker_size=12, name=f"peak of {curve.label}", hoverinfo="text",
                                 hovertext=f"peak {human_bytes(t.peak)} at {t.peak_name or 'the parameters'}<br>{live}"))
    fig.add_hline(y=data.unplanned.timeline.param_bytes, line_dash="dot", line_color="grey", annotation_text="parameters")
    if data.budget is not None:
        fig.add_hline(y=data.budget, line_dash="dash", line_color="red", annotation_text=f"budget {human_bytes(data.budget)}")
    fig.update_layout(title=f"memory timeline of {data.function}", xaxis_title="binding", yaxis_title="live bytes")
    return fig.to_html(include_plotlyjs=True, full_html=True)
