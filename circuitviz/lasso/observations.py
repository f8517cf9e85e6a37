"""Observations for CircuitLasso: token positions of the prompt, its paraphrases, its corrupted
versions and optionally a text corpus, run through the model once with nothing patched.

Every position of every text is one observation (one row of the activation matrices), except
position 0 when it is the BOS token: its activations are the same in every text, so it adds no
variation, only one extreme repeated point. Texts are run in right-padded batches; padding never
affects real positions because attention is causal, and padded positions are dropped. Where it
costs less (every text's BOS, a corruption's unchanged prefix and a template's shared words are
then computed once: factual's 18 texts, 150 padded positions, hold 76 distinct prefixes), they run
as one pass packed as a prefix tree instead (``circuitviz.engine.packed``): the same observations
to float rounding, in the same order, the rows of a shared prefix copies of one row
(``Observations.distinct``).

Where texts come from, in this order (the prompt's own are always kept):
- the prompt and its corrupted version;
- paraphrases and their corruptions from the offline templates of ``circuitviz.query`` (the
  ones Best-of-N uses), when a template family recognises the prompt (otherwise a note says so);
- a corpus: a list of strings, or a text file with one text per line. A line longer than
  ``CORPUS_WINDOW`` tokens (or the model's context) is cut into consecutive windows, each
  starting with BOS (nothing is dropped); when the corpus
  holds more positions than ``max_observations`` allows, a seeded random subset of its windows is
  used and the counts say how many.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask, PromptTask
from ..engine.capture import observe_with_raw_heads
from ..engine.metric import metric_from_residual
from ..engine.packed import PrefixTree, packs, prefix_tree
from ..models.adapter import adapter_of, model_device
from ..models.projections import laid_out_projections
from ..query.families import recognise
from ..query.pairs import ParaphraseError
from ..query.templates import unchecked_template_pairs

CORPUS_WINDOW = 64  # tokens per corpus window, BOS included
_BATCH_BYTES = 512 * 2**20  # working memory of one observation batch
_CPU_PASS_POSITIONS = 32  # a pass's fixed cost on the CPU, in positions (Gemma-3-270M: 0.18 s, 5 ms)


@dataclass
class ObservationTexts:
    """The texts to observe, each with its kind, and notes about sources that were unavailable."""

    texts: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, text: str, kind: str) -> None:
        if text and text.strip():
            self.texts.append(text)
            self.kinds.append(kind)


@dataclass
class Observations:
    """Activation matrices with one row per observed token position.

    writers: [M, n_forward, d_model] (every writer's residual contribution) or None;
    activations: {hook name: [M, ...]}; metric: [M], the task's metric read off the residual at
    each position (for logit_diff: answer logit minus the foils' mean, at that position);
    kinds: the kind of text each row comes from; final [M] bool: the row is its text's last
    position (where the prompt family's answer is predicted); counts: observations (positions)
    per kind; texts: texts per kind.
    """

    writers: torch.Tensor | None
    activations: dict[str, torch.Tensor]
    metric: torch.Tensor
    kinds: list[str]
    final: torch.Tensor
    counts: dict[str, int]
    texts: dict[str, int]
    notes: list[str]
    # the prompt's and its corruption's runs as an evaluator reads them (``keep_runs``): writers
    # [2, pos, n_forward, d_model] with position 0, final residuals [2, d_model], raw heads or None
    runs: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None = None
    # (first [r], inverse [M]): row i equals row first[inverse[i]] bit for bit (a packed pass's
    # shared prefixes), so the reduction may run on the r distinct rows; None: not known
    distinct: tuple[torch.Tensor, torch.Tensor] | None = None

    def rows_of(self, *kinds: str) -> torch.Tensor:
        """Which rows come from texts of the given kinds.  # [M] bool"""
        return torch.tensor([kind in kinds for kind in self.kinds], dtype=torch.bool)

    @property
    def n_observations(self) -> int:
        return int(self.metric.shape[0])

    def summary(self) -> dict:
        """Plain counts for the result's details and the CLI."""
        return {
            "total": self.n_observations,
            "positions_by_kind": dict(self.counts),
            "texts_by_kind": dict(self.texts),
            "notes": list(self.notes),
        }


def read_corpus(corpus: str | Path | list[str] | tuple[str, ...] | None) -> list[str]:
    """Corpus texts from a list of strings or a UTF-8 text file (one text per non-empty line)."""
    if corpus is None or corpus == "":
        return []
    if isinstance(corpus, (list, tuple)):
        return [str(text) for text in corpus if str(text).strip()]
    path = Path(str(corpus)).expanduser()
    if not path.is_file():
        raise ValueError(
            f"The corpus file {str(path)!r} does not exist; give a UTF-8 text file with one text per line."
        )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"The corpus file {str(path)!r} is not UTF-8 text; save it as UTF-8.") from None
    return [line for line in lines if line.strip()]


def paraphrase_pairs(task: PromptTask, count: int, seed: int = 0) -> tuple[list[tuple[str, str]], str]:
    """Up to ``count`` (paraphrase, corrupted paraphrase) pairs from the offline templates.

    Observations need no check that the model answers each paraphrase as it answers the prompt
    (that check costs a forward pass over every pair), so the template rewrites are taken as
    generated, each with its first corruption. Returns ([], a note saying why) when the
    templates give none.
    """
    if count <= 0:
        return [], ""
    if recognise(task.clean) is None:
        return [], "paraphrases: no template family recognises the prompt; give a corpus instead"
    try:
        pairs = unchecked_template_pairs(task, count, seed)
    except ParaphraseError as error:
        return [], f"paraphrases: none from the templates ({error})"
    if not pairs:
        return [], "paraphrases: the templates gave none for this prompt"
    return pairs, ""


def observation_texts(
    task: PromptTask,
    paraphrases: int = 0,
    corpus: str | Path | list[str] | None = None,
    seed: int = 0,
) -> ObservationTexts:
    """The prompt, its corruption, its paraphrases (with theirs) and the corpus, with kinds."""
    texts = ObservationTexts()
    texts.add(task.clean, "prompt")
    texts.add(task.corrupted, "corrupted")
    pairs, note = paraphrase_pairs(task, paraphrases, seed)
    if note:
        texts.notes.append(note)
    for clean, corrupted in pairs:
        texts.add(clean, "paraphrase")
        texts.add(corrupted, "paraphrase_corrupted")
    for line in read_corpus(corpus):
        texts.add(line, "corpus")
    return texts


def _token_rows(model, texts: ObservationTexts) -> list[tuple[str, list[int]]]:
    """(kind, token ids with BOS) per observed sequence; corpus lines cut into windows."""
    window = min(CORPUS_WINDOW, int(model.cfg.n_ctx))
    rows = []
    for text, kind in zip(texts.texts, texts.kinds):
        ids = adapter_of(model).to_tokens(text, truncate=False, on_device=False)[0].tolist()
        if len(ids) <= window:
            rows.append((kind, ids))
            continue
        if kind != "corpus":
            raise ValueError(
                f"A {kind.replace('_', ' ')} text is {len(ids)} tokens, over the model's context of "
                f"{model.cfg.n_ctx}; shorten it."
            )
        head, body = ids[:1], ids[1:]
        for start in range(0, len(body), window - 1):
            rows.append((kind, head + body[start : start + window - 1]))
    return rows


def _observed_positions(model, ids: list[int]) -> int:
    """How many positions of a sequence are observations (all but a leading BOS)."""
    bos = adapter_of(model).bos_token_id
    return len(ids) - (1 if ids and bos is not None and ids[0] == bos else 0)


def _cap_corpus(model, rows, max_observations: int, seed: int) -> tuple[list, dict]:
    """Keep the prompt's own rows; subsample corpus windows (seeded) to fit ``max_observations``."""
    own = [row for row in rows if row[0] != "corpus"]
    corpus = [row for row in rows if row[0] == "corpus"]
    used = sum(_observed_positions(model, ids) for _, ids in own)
    if used > max_observations:
        raise ValueError(
            f"The prompt, its corruption and paraphrases alone give {used} observations, over "
            f"max_observations={max_observations}; raise max_observations or use fewer paraphrases."
        )
    available = sum(_observed_positions(model, ids) for _, ids in corpus)
    order = list(range(len(corpus)))
    random.Random(seed).shuffle(order)
    kept = []
    for index in order:
        size = _observed_positions(model, corpus[index][1])
        if used + size > max_observations:
            continue
        kept.append(index)
        used += size
    chosen = [corpus[index] for index in sorted(kept)]
    corpus_used = sum(_observed_positions(model, ids) for _, ids in chosen)
    info = {"corpus_positions_available": available, "corpus_positions_used": corpus_used}
    return own + chosen, info


def _batches(rows, bytes_per_position: int, pass_cost: int = 0):
    """Rows grouped (longest first) so that one padded batch stays within the memory budget.

    With ``pass_cost`` > 0 (a pass's fixed cost in positions: on the CPU, reading the weights
    costs about what 32 positions do), consecutive rows of the length order are grouped so that
    padded positions plus ``pass_cost`` per pass are fewest (exact, over the distinct lengths):
    texts of very different lengths no longer pad the short ones to the longest. The rows'
    order, and so the observations' order, is the same either way.
    """
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i][1]))
    if pass_cost > 0 and order:
        yield from _grouped(rows, order, bytes_per_position, pass_cost)
        return
    yield from _within_memory(rows, order, bytes_per_position)


def _within_memory(rows, order: list[int], bytes_per_position: int):
    """``order``'s rows in consecutive batches, each as large as the memory budget allows."""
    batch: list[int] = []
    for index in order:
        longest = len(rows[batch[0]][1]) if batch else len(rows[index][1])
        if batch and (len(batch) + 1) * longest * bytes_per_position > _BATCH_BYTES:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def _grouped(rows, order: list[int], bytes_per_position: int, pass_cost: int):
    """Split ``order`` (longest first) at length changes where that saves padding (see ``_batches``)."""
    lengths = [len(rows[i][1]) for i in order]
    starts = [k for k in range(len(order)) if k == 0 or lengths[k] != lengths[k - 1]]  # length runs
    bounds = starts + [len(order)]
    runs = len(starts)
    best = [0.0] + [float("inf")] * runs  # best[j]: cost of the first j runs
    cut = [0] * (runs + 1)
    for j in range(1, runs + 1):
        for i in range(j):  # one group: runs i..j-1, padded to run i's length
            size = bounds[j] - bounds[i]
            passes = -(-size * lengths[bounds[i]] * bytes_per_position // _BATCH_BYTES)
            cost = best[i] + size * lengths[bounds[i]] + pass_cost * max(1, passes)
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], runs
    while j > 0:
        groups.append((bounds[cut[j]], bounds[j]))
        j = cut[j]
    for first, last in reversed(groups):
        yield from _within_memory(rows, order[first:last], bytes_per_position)


def _joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """The batches' rows in one tensor; one batch's as they are (the masked rows are already a
    copy of their own: copying the writers again cost a 60 MB pass on IOI)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def metric_at_positions(
    model, prepared: PreparedTask, residual: torch.Tensor, chunk: int = 64
) -> torch.Tensor:
    """The task's metric read off the final residual at every row of residual [M, d_model].  # [M]"""
    values = [
        metric_from_residual(model, prepared, residual[start : start + chunk]).float()
        for start in range(0, residual.shape[0], chunk)
    ]
    return torch.cat(values) if values else torch.zeros(0)


@torch.no_grad()
def collect_observations(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    texts: ObservationTexts,
    hook_names=(),
    keep_writers: bool = True,
    max_observations: int = 1024,
    seed: int = 0,
    keep_runs: bool = False,
    check=None,
) -> Observations:
    """Run every text once and stack the observed positions' activations (on the model's device);
    ``check`` is called before each block of each pass (a run's progress report).

    With ``keep_runs`` (and ``keep_writers``) the prompt's and its corruption's rows are also kept
    whole, as the clean and corrupted runs of an evaluator (``Observations.runs``), when they are
    exactly the prepared task's tokens: the texts' pass then makes those two runs too.
    """
    rows = _token_rows(model, texts)
    rows, cap_info = _cap_corpus(model, rows, max_observations, seed)
    run_rows = _run_rows(rows, prepared) if keep_runs and keep_writers else {}
    runs: dict[int, tuple] = {}
    device = model_device(model)
    pad = adapter_of(model).pad_token_id
    pad = int(pad if pad is not None else 0)
    bytes_per_position = 4 * spec.d_model * (spec.n_forward if keep_writers else 1) + 4 * spec.d_model * 8
    writers, residuals, kinds, final = [], [], [], []
    activations: dict[str, list[torch.Tensor]] = {name: [] for name in hook_names}
    # on the CPU a pass costs about 32 positions besides its positions (reading the weights);
    # elsewhere positions cost little next to the launches, so one batch within memory is best
    pass_cost = _CPU_PASS_POSITIONS if device.type == "cpu" else 0
    batches = list(_batches(rows, bytes_per_position, pass_cost))
    for batch in batches:  # the observations' order, whichever way the texts run
        for index in batch:
            observed = _observed_positions(model, rows[index][1])
            kinds += [rows[index][0]] * observed
            final += [False] * (observed - 1) + [True] if observed else []
    tree = _tree_if_cheaper(model, spec, rows, batches, bytes_per_position, pass_cost)
    if tree is not None:
        passes = [
            lambda: _packed_pass(model, spec, rows, batches, tree, hook_names, keep_writers, run_rows, check)
        ]
    else:
        passes = [
            lambda batch=batch: _batch_pass(
                model, spec, rows, batch, hook_names, keep_writers, run_rows, pad, check
            )
            for batch in batches
        ]
    for run in passes:
        # one q/k/v input a layer, not a private copy per head (nothing here reads a head's own
        # input): a layer's projections are then one product, not an einsum per head; a
        # grouped-query model's keys and values once per key/value head, not per query head (the
        # reduction reads each group's keys and values once anyway); and the projections' weights
        # laid out once, not on every pass. On the embedded Gemma the pass's activations are the
        # same to the bit; on factual the grouping took the pass from 0.58 to 0.50 CPU-s and the
        # laid-out weights 0.02 more (medians, alternating in one process)
        with adapter_of(model).split_attention_inputs(False, grouped=True), laid_out_projections(model):
            batch_writers, residual, captured, batch_runs = run()
        runs.update(batch_runs)
        if batch_writers is not None:
            writers.append(batch_writers)
        residuals.append(residual)
        for name in hook_names:
            activations[name].append(captured[name].to(device))
    residual = _joined(residuals) if residuals else torch.zeros(0, spec.d_model, device=device)
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    text_counts: dict[str, int] = {}
    for kind in texts.kinds:
        text_counts[kind] = text_counts.get(kind, 0) + 1
    notes = list(texts.notes)
    if cap_info["corpus_positions_used"] < cap_info["corpus_positions_available"]:
        notes.append(
            f"corpus: used {cap_info['corpus_positions_used']} of its "
            f"{cap_info['corpus_positions_available']} positions (max_observations={max_observations})"
        )
    return Observations(
        writers=_joined(writers) if writers else None,
        activations={name: _joined(parts) for name, parts in activations.items() if parts},
        metric=metric_at_positions(model, prepared, residual),
        kinds=kinds,
        final=torch.tensor(final, dtype=torch.bool),
        counts=counts,
        texts=text_counts,
        notes=notes,
        runs=_stacked_runs(runs) if len(runs) == 2 else None,
        distinct=_distinct_rows(_packed_order(model, rows, batches, tree)) if tree is not None else None,
    )


def _batch_pass(
    model, spec, rows, batch: list[int], hook_names, keep_writers: bool, run_rows: dict, pad: int, check=None
):
    """One padded batch of texts: (writers [m, n_forward, d_model] or None, final residual [m,
    d_model], {hook: [m, ...]} (on each layer's device), {run: (writers, residual, raw)}) over the
    batch's m observed positions, in order."""
    bos = adapter_of(model).bos_token_id
    length = max(len(rows[i][1]) for i in batch)
    # filled row by row on the CPU on purpose; the pass moves them to the model's device
    tokens = torch.full((len(batch), length), pad, dtype=torch.long, device="cpu")
    keep = torch.zeros(len(batch), length, dtype=torch.bool, device="cpu")
    for row, index in enumerate(batch):
        ids = rows[index][1]
        tokens[row, : len(ids)] = torch.tensor(ids, device="cpu")
        keep[row, : len(ids)] = True
        if ids and bos is not None and ids[0] == bos:
            keep[row, 0] = False
    in_batch = [row for row, index in enumerate(batch) if index in run_rows]
    batch_writers, captured, residual, raw = observe_with_raw_heads(
        model, spec, tokens, hook_names, keep_writers, in_batch, check=check
    )
    runs = {}
    for j, row in enumerate(in_batch):  # a prompt's whole run, BOS included
        n = len(rows[batch[row]][1])
        whole = raw[j : j + 1, :n] if raw is not None else None
        runs[run_rows[batch[row]]] = (batch_writers[row : row + 1, :n].clone(), residual[row, n - 1], whole)
    keep = keep.to(residual.device)
    writers = batch_writers[keep] if batch_writers is not None else None
    seen = {name: value[keep.to(value.device)] for name, value in captured.items()}
    return writers, residual[keep], seen, runs


def _tree_if_cheaper(
    model, spec, rows, batches, bytes_per_position: int, pass_cost: int
) -> PrefixTree | None:
    """The texts' prefix tree when one packed pass of it costs less than the batches (positions,
    a pass's fixed cost, and attention over every pair of the packed positions) and fits the
    memory budget and the model (``engine.packed``), else None."""
    tree = prefix_tree([ids for _, ids in rows])
    n = tree.n_nodes
    if n * bytes_per_position > _BATCH_BYTES or not packs(model, n):
        return None
    pair = _pair_cost(model, spec)
    batched = sum(
        len(batch) * length + pass_cost + pair * len(batch) * length**2
        for batch in batches
        for length in [max(len(rows[i][1]) for i in batch)]
    )
    return tree if n + pass_cost + pair * n**2 < batched else None


def _pair_cost(model, spec) -> float:
    """Attention's cost per (query, key) pair in positions: its products (4 x heads x d_head
    multiply-adds a layer) over a position's (about the layer's weights), doubled for the
    softmax and the mask over the scores."""
    cfg = model.cfg
    heads, d_head, kv = (
        spec.n_heads,
        int(cfg.d_head),
        int(getattr(cfg, "n_key_value_heads", None) or spec.n_heads),
    )
    mlp = (3 if getattr(cfg, "gated_mlp", False) else 2) * spec.d_model * int(cfg.d_mlp or 0)
    weights = spec.d_model * d_head * (2 * heads + 2 * kv) + mlp
    return 2 * (2 * heads * d_head) / max(weights, 1)


def _packed_pass(
    model, spec, rows, batches, tree: PrefixTree, hook_names, keep_writers: bool, run_rows: dict, check=None
):
    """``_batch_pass`` of every text at once, packed as ``tree``; the rows in the batches' order."""
    order = _packed_order(model, rows, batches, tree)
    wanted = sorted(run_rows)
    raw_positions = [node for index in wanted for node in tree.paths[index]]
    writers, captured, residual, raw = observe_with_raw_heads(
        model,
        spec,
        tree.tokens[None],
        hook_names,
        keep_writers,
        [0] if wanted else (),
        tree,
        raw_positions,
        check,
    )
    runs, start = {}, 0
    for index in wanted:  # a prompt's whole run, BOS included
        path = tree.paths[index]
        whole = raw[:, start : start + len(path)] if raw is not None else None
        start += len(path)
        runs[run_rows[index]] = (writers[:, path], residual[0, path[-1]], whole)
    pick = torch.tensor(order, dtype=torch.long, device="cpu")  # moved to each tensor's device below
    picks: dict = {}  # once per device, not once per hook (each copy waits for a GPU's queue)

    def chosen(value: torch.Tensor) -> torch.Tensor:
        if value.device not in picks:
            picks[value.device] = pick.to(value.device)
        return value[0].index_select(0, picks[value.device])

    kept = chosen(writers) if writers is not None else None
    seen = {name: chosen(value) for name, value in captured.items()}
    return kept, chosen(residual), seen, runs


def _packed_order(model, rows, batches, tree: PrefixTree) -> list[int]:
    """The packed node of every observation, in the batches' order (BOS left out as they leave it)."""
    bos = adapter_of(model).bos_token_id
    order = []
    for batch in batches:
        for index in batch:
            path, ids = tree.paths[index], rows[index][1]
            order += path[1:] if ids and bos is not None and ids[0] == bos else path
    return order


def _distinct_rows(order: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(the first row of each distinct node, in order of appearance; each row's index among them)."""
    index: dict[int, int] = {}  # node -> its index among the distinct rows
    first, inverse = [], []
    for row, node in enumerate(order):
        if node not in index:
            index[node] = len(first)
            first.append(row)
        inverse.append(index[node])
    return (
        torch.tensor(first, dtype=torch.long, device="cpu"),
        torch.tensor(inverse, dtype=torch.long, device="cpu"),
    )


def _run_rows(rows, prepared: PreparedTask) -> dict[int, int]:
    """{row: 0 for the clean run, 1 for the corrupted one}: the prompt's and its corruption's rows
    when their tokens are the prepared task's, else {} (their runs are then made apart)."""
    wanted = (("prompt", prepared.clean_tokens), ("corrupted", prepared.corrupted_tokens))
    if len(rows) < 2:
        return {}
    for index, (kind, tokens) in enumerate(wanted):
        if rows[index][0] != kind or rows[index][1] != tokens[0].tolist():
            return {}
    return {0: 0, 1: 1}


def _stacked_runs(runs: dict[int, tuple]) -> tuple:
    """The clean and corrupted rows' (writers, final residual, raw heads), each stacked clean first."""
    (writers, residual, raw), (writers_c, residual_c, raw_c) = runs[0], runs[1]
    return (
        torch.cat([writers, writers_c]),
        torch.stack([residual, residual_c]),
        torch.cat([raw, raw_c]) if raw is not None else None,
    )
