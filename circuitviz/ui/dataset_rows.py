"""The Dataset page's table of prompts, built once per atlas and choice and kept: a click on the
Prompts tab, on a row's toggle or on another tab and back reran the page, and each run read the
batch's rows into pandas again, wrote every row out as a dict and ran the validity check on each
(about a third of the table's share of the rerun on the stored IOI atlas). Kept by what sets it:
the batch folder and when its table last changed (``dataset._stamp``), the method, budget, share,
the clusters' labels and whether the validity check is on; the arguments named with a leading underscore are what those already
determine, so the cache does not hash them. The page reads the frames and never changes them
(each filter and rename makes a new one)."""

from __future__ import annotations

import streamlit as st


@st.cache_resource(show_spinner=False, max_entries=16)
def prompt_rows(
    folder: str,
    stamp: float,
    label: str,
    budget: int,
    threshold: float,
    clusters: tuple,
    check: bool,
    _batch,
    _view,
    _found,
):
    """(every row of ``label``'s series, its finished rows, the table the page shows of them: id,
    family, prompt, answer, NDF and edges kept at ``budget``, CPR, cluster, Jaccard to the
    consensus and the validity check's sentence or 'passes'). ``clusters``: the clusters' labels
    (``_found``'s), so another count of clusters is its own table; ``check``: whether the validity
    check is on (``task_validity.gap_check_enabled``, which ``refusal`` reads)."""
    # here, not at the top: keeps torch out of the first paint
    import pandas

    rows = _batch.rows(label, done=False).to_pandas()
    done = rows[rows["status"] == "done"].reset_index(drop=True)
    position = list(done["budgets"].iloc[0]).index(budget)
    table = pandas.DataFrame(
        {
            "id": done["task_id"],
            "family": done["family"].mask(done["family"] == ""),  # a file's task without one: '—'
            "prompt": done["clean"],
            "answer": done["answer"],
            "NDF": done["ndf"].map(lambda v: v[position]),
            "edges kept": done["edges_kept"].map(lambda v: v[position]),
            "CPR": done["cpr_nfs"],
        }
    )
    cluster_of = dict(zip(_found["task_index"].tolist(), _found["labels"].tolist()))
    share_of = dict(zip(_view["task_index"].tolist(), _view["jaccard"].tolist()))
    table["cluster"] = [cluster_of.get(i) for i in done["task_index"]]
    table["Jaccard to consensus"] = [share_of.get(i) for i in done["task_index"]]
    table["validity check"] = [refusal(row) or "passes" for row in done.to_dict("records")]
    return rows, done, table


def refusal(row: dict) -> str | None:
    """The validity check's sentence for a table row (from the metrics the batch stored), or None
    when the task passes it: a batch run before the check may hold tasks it now refuses."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import PromptTask
    from ..measure.task_validity import gap_problem

    clean, corrupted = row.get("clean_metric"), row.get("corrupted_metric")
    if clean is None or corrupted is None:
        return None
    task = PromptTask(
        clean=row["clean"],
        corrupted=row["corrupted"],
        answer=row["answer"],
        foils=tuple(row["foils"]),
        metric=row["metric"],
    )
    return gap_problem(task, float(clean), float(corrupted))
