"""The memory timeline as a picture: its data is the exact memory model's, the planned curve fits the
budget, the peaks are marked where the curves reach their maxima; the CLI writes valid PNG / SVG / HTML;
clear errors without matplotlib or plotly."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.analysis import live_at_peak, memory_timeline
from retrograd.cli import main
from retrograd.errors import DiagnosticError
from retrograd.analysis.memory import human_bytes
from retrograd.passes import Gradient
from retrograd.passes.checkpoint import plan_checkpoint

import models  # noqa: E402

FUNC = "main_adjoint"


@pytest.fixture(scope="module")
def adjoint():
    return Gradient("main")(retrograd.parse(models.resnet_text(stages=1, blocks=6, channels=4, size=8, batch=1)))


def _inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in p.struct_info.shape]).astype(p.struct_info.dtype) for p in func.params]


def _measured_peak(mod):
    ex = retrograd.build(mod)
    ex[FUNC](*_inputs(mod[FUNC]))
    return ex.stats.peak_live_bytes


def _lines(ax):
    return {line.get_gid(): line for line in ax.get_lines()}


def test_live_at_peak_adds_up_to_the_peak_the_executor_measures(adjoint):
    live = live_at_peak(adjoint, FUNC)
    peak = memory_timeline(adjoint, FUNC).peak
    assert sum(n for _, n in live) == peak == _measured_peak(adjoint)
    names = [name for name, _ in live]
    assert len(set(names)) == len(names)
    params = {p.name_hint for p in adjoint[FUNC].params}
    assert params <= set(names)  # the caller holds the parameters for the whole call
    assert [n for _, n in live] == sorted((n for _, n in live), reverse=True)


def test_the_figure_plots_the_memory_model_unplanned_and_planned(adjoint):
    need("matplotlib")
    from retrograd.visualize.memory_plot import memory_figure

    unplanned = memory_timeline(adjoint, FUNC)
    budget = unplanned.peak * 9 // 10
    planned_mod, report = plan_checkpoint(adjoint, FUNC, budget)
    planned = memory_timeline(planned_mod, FUNC)
    assert planned.peak == _measured_peak(planned_mod)

    fig = memory_figure(adjoint, FUNC, budget=budget)
    ax = fig.axes[0]
    lines = _lines(ax)
    for label, t in (("unplanned", unplanned), (f"planned for {human_bytes(budget)}", planned)):
        curve, peak = lines[f"curve:{label}"], lines[f"peak:{label}"]
        np.testing.assert_array_equal(curve.get_ydata(), t.during)
        np.testing.assert_array_equal(curve.get_xdata(), np.arange(len(t.during)))
        # The marker sits on the curve's maximum, at the first binding reaching it.
        (px,), (py,) = peak.get_xdata(), peak.get_ydata()
        assert py == t.peak == max(t.during) and px == int(np.argmax(t.during))
    budget_y = lines["budget"].get_ydata()[0]
    assert budget_y == budget == report.budget
    assert max(lines[f"curve:planned for {human_bytes(budget)}"].get_ydata()) <= budget_y
    assert max(lines["curve:unplanned"].get_ydata()) > budget_y
    assert lines["params"].get_ydata()[0] == unplanned.param_bytes
    text = "\n".join(t.get_text() for t in fig.axes[1].texts)
    biggest, nbytes = live_at_peak(planned_mod, FUNC)[0]
    assert biggest in text and human_bytes(nbytes) in text


def test_a_percent_budget_and_no_budget(adjoint):
    need("matplotlib")
    from retrograd.visualize.memory_plot import memory_curves, memory_figure

    data = memory_curves(adjoint, FUNC, "90%")
    assert data.budget == int(memory_timeline(adjoint, FUNC).peak * 0.9)
    assert data.planned.timeline.peak <= data.budget
    fig = memory_figure(adjoint, FUNC)
    lines = _lines(fig.axes[0])
    assert "budget" not in lines and not any(g.startswith("curve:planned") for g in lines)


def test_cli_writes_png_and_svg(adjoint, tmp_path, capsys):
    image = need("matplotlib.image")
    script = tmp_path / "adj.py"
    script.write_text(adjoint.script())
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    assert main(["memory", str(script), "--func", FUNC, "--budget", "90%", "-o", str(png)]) == 0
    out = capsys.readouterr().out
    peak = memory_timeline(adjoint, FUNC).peak
    assert f"unplanned: peak {peak} bytes" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
    assert main(["memory", str(script), "--func", FUNC, "-o", str(svg)]) == 0
    assert ET.parse(svg).getroot().tag.endswith("svg")


def test_cli_html_is_an_interactive_page(adjoint, tmp_path):
    need("plotly")
    script = tmp_path / "adj.py"
    script.write_text(adjoint.script())
    page = tmp_path / "t.html"
    assert main(["memory", str(script), "--func", FUNC, "--budget", "90%", "--html", "-o", str(page)]) == 0
    html = page.read_text()
    t = memory_timeline(adjoint, FUNC)
    assert "<html" in html and "plotly" in html.lower()
    assert t.peak_name in html and "budget" in html


@pytest.mark.parametrize("argv, fragment", [
    ([], "-o timeline.png"),
    (["-o", "t.jpg"], "png, svg, pdf"),
    (["--html", "-o", "t.png"], "*.html"),
    (["--func", "mian", "-o", "t.png"], "main"),
])
def test_cli_usage_errors(adjoint, tmp_path, capsys, argv, fragment):
    need("matplotlib")
    script = tmp_path / "adj.py"
    script.write_text(adjoint.script())
    assert main(["memory", str(script), *argv]) == 1
    assert fragment in capsys.readouterr().err


def test_an_infeasible_budget_is_the_checkpoint_pass_error(adjoint):
    need("matplotlib")
    from retrograd.visualize.memory_plot import memory_figure

    with pytest.raises(DiagnosticError, match="least feasible"):
        memory_figure(adjoint, FUNC, budget=16)


@pytest.mark.parametrize("module, call", [("matplotlib", "memory_figure"), ("plotly", "memory_html")])
def test_without_the_package_the_error_says_what_to_install(adjoint, monkeypatch, module, call):
    from retrograd.visualize import memory_plot

    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(DiagnosticError, match=rf"pip install {module} \(or pip install \"retrograd\[plot\]\"\)"):
        getattr(memory_plot, call)(adjoint, FUNC)


CORPUS = sorted((Path(__file__).resolve().parents[2] / "tests" / "corpus").glob("c*.py"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_live_at_peak_sums_to_the_peak_on_the_corpus(path):
    """(From the coordinator's memplot branch.) Every function of the corpus with a static peak."""
    mod = retrograd.parse_file(str(path))
    for name in mod.keys():
        try:
            peak = memory_timeline(mod, name).peak
        except DiagnosticError:
            continue  # symbolic shapes: no static peak
        assert sum(n for _, n in live_at_peak(mod, name)) == peak, name
