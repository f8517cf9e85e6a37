"""The sentences the pages write beside a method's figures, read as a user reads them (an audit of
Compare and the Gallery, 2026-12-07): plain functions, no model."""

from __future__ import annotations

from circuitviz.core.curves import CurvePoint


class _Result:
    """A result as the sentences read it: its method and curve."""

    details = scores = None

    def __init__(self, method: str, curve: list[CurvePoint]):
        self.method, self.curve = method, curve


def test_a_zero_ndf_caveat_names_a_plural_label_as_a_possessive():
    """Compare (IOI, Gemma-3-270M, budget 20) read "Information flow routes's edge scores do not
    estimate the change ..." under flow routes' NDF 0.000; the label's gloss is left out too."""
    from circuitviz.ui.caveats import caveats

    curve = [CurvePoint(20, 19, 0.0, 0.0, 0.0), CurvePoint(10000, 8491, 0.72, 0.72, 0.9)]
    (zero,) = caveats(_Result("flow-routes", curve), curve[0])
    assert zero.startswith("NDF 0.000 at this budget: Information flow routes' edge scores do not"), zero
    assert "routes's" not in zero


def test_compares_faithful_line_joins_the_methods_that_reach_it_as_a_sentence():
    """Four methods on "The Eiffel Tower is located in the city of" at budget 500 read "At budget
    500 eap, eap-ig, atp-star reach NDF 0.8": the list ends with "and"."""
    from types import SimpleNamespace

    from circuitviz.ui import compare

    def result(ndf: float):
        curve = [CurvePoint(500, 480, 1.0, ndf, ndf)]
        return SimpleNamespace(curve=curve, point=lambda b: curve[0], graph=SimpleNamespace(n_edges=10342))

    results = {"eap": result(0.87), "eap-ig": result(0.88), "cd-t": result(0.2), "atp-star": result(0.85)}
    line = compare.faithful_line(results, 500)
    assert line.startswith("At budget 500 eap, eap-ig and atp-star reach NDF 0.8."), line
    del results["eap-ig"]
    assert compare.faithful_line(results, 500).startswith("At budget 500 eap and atp-star reach NDF 0.8.")


def test_the_paraphrases_a_method_used_name_its_circuit_in_words():
    """Compare's held-out table (paraphrase pruning beside EAP-IG at budget 20) read "Not held out,
    as used to fit or select: 3 by paraphrase-pruning@20", the circuit's key; the key names a
    method at a budget, so it reads so, a method's budgets of one count together."""
    from circuitviz.measure.transfer import Transfer, shortfall_note, used_note

    def found(excluded: dict) -> Transfer:
        return Transfer(
            ndf={n: [0.5] * 5 for n in excluded},
            texts={n: ["p"] * 5 for n in excluded},
            excluded=excluded,
        )

    one = found({"paraphrase-pruning@20": 3, "eap-ig@20": 0})
    assert used_note(one) == "Not held out, as used to fit or select: 3 by paraphrase-pruning at budget 20."
    every = found({f"paraphrase-pruning@{b}": 3 for b in (20, 50, 1000)})
    assert used_note(every) == (
        "Not held out, as used to fit or select: 3 by paraphrase-pruning at budgets 20, 50 and 1,000."
    )
    assert used_note(found({"bon": 9})) == "Not held out, as used to fit or select: 9 by bon."
    short = shortfall_note(found({"paraphrase-pruning@20": 3}), count=8, given=9)
    assert "(paraphrase-pruning at budget 20)" in short and "@" not in short, short


def test_the_held_out_sets_sentence_names_one_method_and_orders_a_tie_as_the_page():
    """EAP-IG beside paraphrase pruning (each its own five) read "paraphrase-pruning on 5; eap-ig's 5
    share 3 with theirs": "theirs" of one method, and which came first depended on a set's order."""
    from circuitviz.ui.compare import held_out_sets_sentence

    measured = {
        "eap-ig": {"texts": ["p0", "p1", "p2", "p3", "p4"]},
        "paraphrase-pruning": {"texts": ["p0", "p1", "p2", "p5", "p6"]},
    }
    assert held_out_sets_sentence(measured) == (
        "Each held-out NDF is the mean over the first n kept paraphrases its method never used, so the "
        "means rest on different paraphrases: eap-ig on 5; paraphrase-pruning's 5 share 3 with eap-ig's."
    )
