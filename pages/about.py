"""About: what the methods and the faithfulness scores mean, with the papers' figures beside ours."""

from pathlib import Path

import streamlit as st

from circuitviz.ui import loaders, state
from circuitviz.ui.caveats import fitted_methods_sentence, subordinate_headings, wide_tables_css
from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)
# About reads no page's field: its address keeps the app-wide ones (model, device, the task) and
# drops the rest, as every page's does (a hand-made /about?decision=2 kept Signals' decision)
state.write_to_url()

st.title("About circuitviz")
st.markdown(
    """
A language model's answer to one prompt is carried by a small part of the model: some attention
heads and MLPs, and the **edges** between them (one component writing into the residual stream,
a later one reading it). circuitviz finds that **circuit** for your prompt and measures how much
of the model's behaviour it reproduces.

**The task.** A prompt *q* (“When Mary and John went to the store, John gave a drink to”), a
corrupted prompt *q′* of the same token length with the key fact or names replaced, the answer
token (“ Mary”) and a foil (“ John”). The metric *L* is the logit of the answer minus that of the
foil at the last position.

**Faithfulness.** A circuit *C* is tested by running *q* while every edge outside *C* carries the
activation it has on *q′*.
- **NDF** (normalised deviation faithfulness, Query Circuits): 1 − min(|L(M(q)) − L(C(q))| /
  |L(M(q)) − L(M(q′))|, 1). In [0, 1]; 1 means the circuit reproduces the model, 0 that it
  deviates as much as the corruption does — in either direction.
- **NFS** (the older normalised faithfulness score): (L(C(q)) − L(M(q′))) / (L(M(q)) − L(M(q′))).
  Unbounded: a circuit that overshoots scores above 1 and looks “better than perfect”.
- **Necessity**: min(|L(M(q)) − L((M∖C)(q))| / |L(M(q)) − L(M(q′))|, 1), the full model with only
  the circuit's edges corrupted. NDF asks whether the circuit suffices, necessity whether the model
  needs it: 1 means removing the circuit removes the whole clean–corrupted difference.
- **Completeness**: a random half *K* of the circuit removed from the circuit and from the whole
  model, 1 − mean |L((C∖K)(q)) − L((M∖K)(q))| / |L(M(q)) − L(M(q′))| over 8 halves: 1 means the model
  holds no route the circuit lacks. Necessity is near 1 for nearly every circuit that holds the few
  edges everything passes through; completeness tells those circuits apart.
- **Transfer**: a circuit's NDF on paraphrases of the prompt its method never used to fit or to
  select (Best-of-N's, the bootstrap ensemble's and paraphrase pruning's own are left out).
- A task runs only when its corruption lowers the metric clearly (by at least 1 logit of logit
  difference, 0.3 nats of log-probability or 0.05 of probability); otherwise every score above
  divides by noise, and the app says so before Run.
- The **edge budget** N is how many edges a circuit may keep (before pruning edges that lie on no
  path from the input to the logits). The curve shows NDF against N.
"""
)
st.subheader("The methods")
from circuitviz.methods import available_methods  # noqa: E402  (after the first paint)

for name, method in sorted(available_methods().items()):
    st.markdown(f"- **{method.label}** (`{name}`): {method.summary}")
st.markdown(
    """
How the Best-of-N family works (Query Circuits: `bon`, `ibon`, `bon-csm`): score the prompt and p
paraphrases (p: the setting “n paraphrases”, or the pairs listed when their source is a file), make
one candidate circuit from each (N = p + 1), keep the candidate most faithful on the original
prompt; iBoN and BoN-CSM build a circuit for any budget from the BoN circuits without new scoring.
The Paraphrases page shows a run's paraphrases, their checks and each candidate's faithfulness.
"""
)
st.subheader("The papers' figures and ours")
paper = [
    {"claim": "Best-of-N reaches NDF 0.6 (MMLU, Llama-3.2-1B-Instruct)", "paper": "~5k edges (1.3%)"},
    {"claim": "single-query EAP-IG reaches NDF 0.6 (same setting)", "paper": "~200k edges (51.7%)"},
    {"claim": "NFS vs NDF on three MMLU items", "paper": "NFS 2.15 / 1.32 / −1.57 vs NDF 0.00 / 0.68 / 0.00"},
    {"claim": "IOI: edges shared by BoN candidates and the capability circuit (N = 500)", "paper": "66"},
]
st.caption(
    "The papers' own settings (MMLU on Llama-3.2-1B-Instruct, NDF 0.6; IOI on GPT-2 small): no row "
    "below measures the same thing, so read the two tables as what each setting gives, not as one "
    "figure against another."
)
# static tables, whose cells wrap: a dataframe's columns keep their width, so at 1,000 px (a
# 540 px column) the papers' figures read "~200k edges (51.7" and ours lost three columns
st.table(paper, border="horizontal", hide_index=True)
ours = [
    {
        "example": entry["title"],
        # each example's own: they were Edge Pruning's while the header said "EAP-IG, 20 steps"
        "model, method": f"{entry['model_id']}, {entry['method']}",
        "clean L": f"{entry['clean_metric']:+.2f}",
        "corrupted L": f"{entry['corrupted_metric']:+.2f}",
        "edges for the headline NDF": f"{entry['headline']['n_edges']:,} "
        f"({100 * entry['headline']['n_edges'] / max(entry['budgets']):.1f}%)",
        "NDF": f"{entry['headline']['ndf']:.2f}",
    }
    for entry in loaders.gallery_index()
]
if ours:
    st.caption(
        "Ours, from the Gallery's stored results on the embedded models, each with its own method "
        "(named in the table): the smallest evaluated budget whose circuit reaches NDF 0.8 (or the "
        "best NDF when none does)."
    )
    st.table(ours, border="horizontal", hide_index=True)

st.subheader("How faithful each method's circuits are")
_ASSETS = Path(__file__).resolve().parents[1] / "assets"
_faithfulness = _ASSETS / "faithfulness.md"
_fitted = {
    name: (m.label, m.fitted_to_prompt)
    for name, m in sorted(available_methods().items())
    if m.fitted_to_prompt
}
st.markdown(
    """
Every method measured the same way on the embedded Gemma-3-270M over the nine example prompts
(`benchmarks/bench_faithfulness.py`): NDF of its circuits at a few small budgets and CPR / CMD
(the areas under the faithfulness curve), how well its node scores follow the effect of patching
each head or MLP alone, how its circuits hold up on paraphrases of the prompt they never saw
(transfer, held out), their necessity and their completeness.
"""
)
st.markdown(
    fitted_methods_sentence(
        _fitted, _faithfulness.read_text(encoding="utf-8") if _faithfulness.is_file() else None
    )
    + " Their NDF there may flatter them (a circuit can still score higher on a paraphrase), and the "
    "paraphrase columns show how much of it carries over beyond the one sentence. ACC++ is measured on "
    "its traced circuit completed with its heads' value paths and its MLPs' inputs. Below the tables, "
    "the planted-circuit benchmark: models whose true circuit is known."
)
# the tables below are wider than the page at 1,000 px (up to 835 px in a 540 px column): each
# scrolls sideways in its own box instead of the whole page scrolling sideways under them, its
# first column (the method, the prompt's kind) in place: scrolled to CMD at 1,000 px, table (a)'s
# 105 px of method names went out of view with the columns before, and no row said whose it was
st.html(wide_tables_css(st.context.theme.type))
# a browser with overlay scroll bars (headless Chromium, macOS) shows no bar until one scrolls: at
# 1,000 px table (a) ended at 'CPR' with nothing saying CMD and CPR (NDF) were a scroll away
st.caption(
    "In a narrow window a wide table scrolls sideways in its own box: its last columns are a scroll "
    "away, and its first column stays in place."
)
for _name, _made_by in (
    ("faithfulness.md", "benchmarks/bench_faithfulness.py --markdown assets/faithfulness.md"),
    ("planted_bench.md", "python -m circuitviz planted-bench --markdown assets/planted_bench.md"),
):
    _path = _ASSETS / _name
    if _name == "planted_bench.md":
        st.subheader("Planted circuits: does a method find a circuit known in advance?")
        st.caption(
            "Small synthetic models built with a circuit planted in them (not Gemma; the models are "
            "described under the table), each method's circuit compared edge by edge with the planted one. "
            "SHD (structural Hamming distance): the edges to add plus the edges to delete to turn the "
            "method's circuit into the planted one (0 = found exactly; lower is better). |T|: the number "
            "of edges of the planted (true) circuit; every method runs with |T| as its budget, and the "
            "@|T| columns score its |T| highest-scored edges (how well it ranks)."
        )
    if _path.is_file():  # its headings under this page's subheader, two levels lower
        st.markdown(subordinate_headings(_path.read_text(encoding="utf-8")))
    else:
        st.caption(f"assets/{_name} is not there; `{_made_by}` makes it.")
