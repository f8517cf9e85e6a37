"""A method's own flat-curve sentence names the highest NDF unless every one reads 0.000:
CircuitLasso's said "NDF is 0 at every budget" under discover's table whose budget 100 read NDF
0.031 (the orchard prompt, Gemma-3-270M, 2026-12-07), as the generic sentence did until 2026-12-06."""

from test_result_sentences import Result, _points

from circuitviz.methods.registry import method_traits


def test_circuit_lassos_flat_curve_names_its_highest_ndf():
    from circuitviz.ui.result_view import curve_notes

    notes = curve_notes(Result("circuit-lasso", _points((20, 0, 0.0), (100, 67, 0.031), (500, 454, 0.0))))
    flat = next(note for note in notes if "every budget" in note)
    assert flat.startswith("NDF is near 0 at every budget (at most 0.03): CircuitLasso's edges are")
    assert "NDF is 0" not in flat


def test_a_curve_at_zero_everywhere_keeps_ndf_is_0():
    from circuitviz.ui.result_view import curve_notes

    notes = curve_notes(Result("acc++", _points((20, 9, 0.0), (100, 80, 0.0))))
    assert f"NDF is 0 at every budget: {method_traits('acc++').flat_curve_note}" in notes
