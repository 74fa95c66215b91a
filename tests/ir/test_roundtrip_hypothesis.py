"""Random well-formed modules: print -> parse gives a structurally equal module and a textual fixpoint."""

from __future__ import annotations


from hypothesis import HealthCheck, given, settings

# tests/ holds the shared strategies (test directories have no __init__.py).

from strategies import modules  # noqa: E402

from retrograd.ir import well_formed  # noqa: E402
from retrograd.ir.structural import assert_structural_equal, structural_equal, structural_hash  # noqa: E402

# The example count comes from the hypothesis profile (HYPOTHESIS_PROFILE=ci: 300).
ROUNDTRIP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _parser():
    # Imported, never skipped on ImportError: a broken parser must fail these tests, not hide them.
    from retrograd.parser import parse
    from retrograd.parser.printer import print_module

    return parse, print_module


@ROUNDTRIP
@given(modules())
def test_generated_modules_are_well_formed_and_self_equal(mod):
    assert well_formed(mod) == []
    assert structural_equal(mod, mod)
    assert structural_hash(mod) == structural_hash(mod)


@ROUNDTRIP
@given(modules())
def test_print_parse_roundtrip(mod):
    parse, print_module = _parser()
    text = print_module(mod)
    back = parse(text)
    assert well_formed(back) == [], text
    try:
        assert_structural_equal(mod, back)
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- printed text ---\n{text}") from None
    assert structural_hash(back) == structural_hash(mod)
    again = print_module(back)
    assert again == text, "printing the parsed module gives different text"
