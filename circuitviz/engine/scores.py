"""Edge scores from reader gradients: (corrupted - clean) writer output times the gradient at
the reader's input, summed over batch and positions, accumulated in chunks that fit the device.

With ``positions`` the sum over positions is left out: the score of the (edge, position) unit
(u, v, p) is (z'_u[p] - z_u[p]) . dL/d(input of v)[p], scores carry a trailing position axis
[..., n_forward, n_backward, pos], and their sum over it is the position-agnostic score (the
same products, summed in another order: equal to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from ..core.graph import GraphSpec
from ..measure.chunks import run_in_chunks
from ..models.adapter import adapter_of
from .gradients import ReaderGradients, reader_gradients
from .memory import gradient_bytes_per_position
from .metric import task_metric
from .neurons import NeuronScores
from .prefix import pass_checks, shared_prefix

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask


def score_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision edge scores accumulate in: float32 at least (bfloat16 models included)."""
    return torch.promote_types(dtype, torch.float32)


def accumulate_scores(
    spec: GraphSpec,
    scores: torch.Tensor,
    gradients: ReaderGradients,
    differences: torch.Tensor,
    owner: torch.Tensor | None = None,
    positions: bool = False,
    check: Callable[[], None] | None = None,
) -> None:
    """scores[u, v] += sum over batch and positions of differences[u] . gradient[v] (``check``
    called before each layer's product: a run's report, raising once it is cancelled; AtP*'s
    products over every dropped layer's row took 1.4-2 s of a busy CPU).

    ``positions``: scores[u, v, p] += the sum over the batch only (scores [..., n_forward,
    n_backward, pos]); when the pass skipped a shared prefix (differences hold pos' < pos
    positions), its positions are the last pos' of ``scores``.

    differences: [1 or n, pos, n_forward, d_model] (corrupted minus clean writer outputs). With
    ``owner`` [batch] (values 0..n-1), ``scores`` is [n, n_forward, n_backward] and batch element
    b adds to ``scores[owner[b]]`` with ``differences[owner[b]]`` (Best-of-N's pairs in one
    pass). Without it ``scores`` is [n_forward, n_backward] and ``differences`` is shared (batch
    1) or given per batch element. One contraction per layer covers all its readers, formed in
    ``scores``' precision.
    """
    dtype = scores.dtype
    width = 3 * spec.n_heads + 1
    groups = "g" if owner is not None else ""
    keep = "p" if positions else ""  # the position axis kept, or summed
    at = (slice(scores.shape[-1] - differences.shape[1], None),) if positions else ()  # the positions run
    every = (slice(None),) if positions else ()

    def reduce(gradient: torch.Tensor) -> torch.Tensor:
        """The batch summed down to what ``differences`` holds: [1, n or batch, pos, ...], on the
        scores' device (a split model's later layers give their gradients on another)."""
        gradient = gradient.to(device=scores.device, dtype=dtype)
        if owner is not None:
            summed = torch.zeros((scores.shape[0], *gradient.shape[1:]), dtype=dtype, device=gradient.device)
            return summed.index_add_(0, owner, gradient)
        return gradient.sum(0, keepdim=True) if differences.shape[0] == 1 else gradient

    for layer in range(spec.n_layers):
        if check is not None:
            check()
        upstream = spec.upstream_of_mlp(layer)
        readers = slice(layer * width, (layer + 1) * width)
        gradient = reduce(gradients.layer(layer))  # [g, pos, 3H+1, d_model]
        delta = differences[:, :, :upstream].to(dtype)  # [g, pos, upstream, d_model]
        part = torch.einsum(f"gpfd,gprd->{groups}fr{keep}", delta, gradient)  # [(g,) up, 3H+1(, pos)]
        # a layer's own heads feed its MLP but not its own queries, keys and values
        part[(..., slice(spec.upstream_of_heads(layer), None), slice(None, 3 * spec.n_heads), *every)] = 0
        scores[(..., slice(None, upstream), readers, *at)] += part
    gradient = reduce(gradients.logits)  # [g, pos, d_model]
    scores[(..., slice(None), spec.logits_backward, *at)] += torch.einsum(
        f"gpfd,gpd->{groups}f{keep}", differences.to(dtype), gradient
    )


PASS_SHARE = 0.95  # of a scoring chunk's time, its gradient pass (EAP-IG on Gemma-3-270M: 97%)


def chunk_report(
    progress: Callable[[str, float], None], rows: slice, n_items: int
) -> Callable[[float], None]:
    """``report(done)``: the scoring's progress with ``done`` of the chunk ``rows`` behind it."""
    size = rows.stop - rows.start
    return lambda done: progress("score", (rows.start + size * done) / n_items)


def scoring_checks(n_layers: int, progress, rows: slice, n_items: int) -> list:
    """The hooks a scoring chunk's gradient pass reports through before each block, forward and
    backward (``pass_checks``), moving the scoring's progress through the chunk's ``PASS_SHARE``
    ([] without ``progress``): on a CPU one chunk may be the whole phase (EAP-IG's 20 steps on the
    IOI prompt), and its report stood at 'score 0.0%' until the phase ended."""
    if progress is None:
        return []
    report = chunk_report(progress, rows, n_items)
    return pass_checks(n_layers, lambda done: report(PASS_SHARE * done))


def gradient_scores(
    model,
    spec: GraphSpec,
    n_items: int,
    n_positions: int,
    batch_pass: Callable[[slice], tuple[ReaderGradients, torch.Tensor, torch.Tensor | None, slice | None]],
    n_groups: int | None = None,
    progress: Callable[[str, float], None] | None = None,
    positions: bool = False,
    committed: Callable[[slice], None] | None = None,
) -> torch.Tensor:
    """Edge scores summed over ``n_items`` gradient sequences, in chunks that fit the device
    (``positions``: per (edge, position) unit, with a trailing [n_positions] axis).

    ``batch_pass(rows)`` runs the sequences ``rows`` and returns (their gradients, the
    differences they multiply, an owner per sequence or None, the groups those owners index).
    ``committed(rows)`` is called once a chunk's scores are kept (a chunk that ran out of memory
    is computed again in halves: what ``batch_pass`` set aside for ``rows`` is final only then).
    Returns [n_forward, n_backward], or [n_groups, n_forward, n_backward] with owners, on the
    model's device in the precision scores accumulate in.
    """
    adapter = adapter_of(model)
    dtype, device = score_dtype(adapter.dtype), adapter.device
    graph = (spec.n_forward, spec.n_backward, *((n_positions,) if positions else ()))
    scores = torch.zeros((*(() if n_groups is None else (n_groups,)), *graph), dtype=dtype, device=device)

    def compute(rows: slice):
        if progress:  # the chunk starts: the run is scoring (on a CPU one chunk may be all of it)
            progress("score", rows.start / n_items)
        gradients, differences, owner, groups = batch_pass(rows)
        if owner is None:
            part = torch.zeros(graph, dtype=dtype, device=device)
        else:
            part = torch.zeros((groups.stop - groups.start, *graph), dtype=dtype, device=device)
        accumulate_scores(spec, part, gradients, differences, owner, positions, check=products_check(rows))
        return groups, part

    def products_check(rows: slice) -> Callable[[], None] | None:
        """Before each layer's product after the pass: the chunk's last share, layer by layer."""
        if not progress:
            return None
        report, layers = chunk_report(progress, rows, n_items), iter(range(spec.n_layers))
        return lambda: report(PASS_SHARE + (1 - PASS_SHARE) * next(layers, spec.n_layers) / spec.n_layers)

    def commit(rows: slice, result) -> None:
        groups, part = result
        (scores if groups is None else scores[groups]).add_(part)
        if committed is not None:
            committed(rows)
        if progress:
            progress("score", rows.stop / n_items)

    run_in_chunks(
        model,
        "gradient",
        n_items,
        n_positions,
        gradient_bytes_per_position(model, n_positions),
        compute,
        commit,
    )
    return scores


def batched_gradient_scores(
    model,
    spec: GraphSpec,
    tasks: Sequence[PreparedTask],
    clean_writers: torch.Tensor,
    corrupted_writers: torch.Tensor,
    steps: int | None,
    progress: Callable[[str, float], None] | None = None,
    positions: bool = False,
    extra_hooks: Callable[[], list] | None = None,
    split_inputs: bool | None = None,
    neuron_differences: torch.Tensor | None = None,
):
    """EAP-IG (inputs) scores of several tasks of one prompt length, their steps in shared passes
    (``positions``: per (edge, position) unit, [n_tasks, n_forward, n_backward, pos]).

    Row j is what the registered ``eap-ig`` computes for ``tasks[j]`` alone (tested): the
    gradient at k/m of the way from the corrupted to the clean embedding, k = 1..m, averaged,
    times the corrupted-minus-clean writer outputs; ``steps`` None gives EAP (the gradient at
    the clean input itself). The leading positions where the batch's clean and corrupted prompts
    agree run once, without gradients (``shared_prefix``). A batch holds the steps of several tasks, each scored with its own
    answer and foils (Best-of-N's paraphrase pairs, a dataset's prompts); their gradients are
    summed per task and contracted with each task's differences in one product per layer.
    clean_writers, corrupted_writers: [n_tasks, pos, n_forward, d_model].
    ``extra_hooks`` (made per pass by ``extra_hooks()``, a callable) change the backward pass (RelP's
    relevance rules), with ``split_inputs`` as ``reader_gradients`` takes it.
    Returns [n_tasks, n_forward, n_backward] on the model's device; with ``neuron_differences``
    (every MLP neuron's corrupted-minus-clean activation, [n_tasks, pos, n_layers, d_mlp]) also
    the neurons' scores from the same passes (``engine.neurons``): (edges, [n_tasks, n_layers, d_mlp]).
    """
    tasks = list(tasks)
    device = adapter_of(model).device
    differences = corrupted_writers - clean_writers  # [n, pos, n_forward, d_model]
    clean_input, corrupted_input = clean_writers[:, :, 0], corrupted_writers[:, :, 0]  # [n, pos, d_model]
    tokens = torch.cat([t.clean_tokens for t in tasks]).to(device)  # [n, pos]
    n_steps = int(steps) if steps else 1
    jobs = [(j, k) for j in range(len(tasks)) for k in range(1, n_steps + 1)]
    neurons = None
    if neuron_differences is not None:
        dtype = score_dtype(clean_writers.dtype)
        neurons = NeuronScores(spec, neuron_differences, dtype, device)

    def batch_pass(rows: slice):
        batch = jobs[rows]
        owners = [j for j, _ in batch]  # a batch's tasks are contiguous: jobs go task by task
        lowest, highest = owners[0], owners[-1]
        members = slice(lowest, highest + 1)
        prefix = shared_prefix(model, tasks[members])  # positions with no difference run once
        owner = torch.tensor(owners, device=device)
        interpolate = None
        if steps:
            alpha = torch.tensor([k / n_steps for _, k in batch], dtype=clean_input.dtype, device=device)
            alpha = alpha[:, None, None]  # [b, 1, 1]
            start_value = corrupted_input[owner, prefix:]  # [b, pos - prefix, d_model]
            end_value = clean_input[owner, prefix:]

            def interpolate(x):
                return start_value + alpha * (end_value - start_value)  # [b, pos - prefix, d_model]

        metric = task_metric(model, tasks, owner)
        checks = scoring_checks(spec.n_layers, progress, rows, len(jobs))
        gradients, _ = reader_gradients(
            model,
            spec,
            tasks[0],
            len(batch),
            interpolate,
            extra_hooks=(extra_hooks() if extra_hooks is not None else []) + checks or None,
            tokens=tokens[owner],
            metric=metric,
            prefix=prefix,
            split_inputs=split_inputs,
            extra_grads=neurons.names if neurons is not None else (),
        )
        if neurons is not None:  # each neuron's difference times its gradient, summed per task
            neurons.add(rows, gradients.grads, owner, prefix)
        return gradients, differences[members, prefix:], owner - lowest, members

    scores = gradient_scores(
        model,
        spec,
        len(jobs),
        tasks[0].n_positions,
        batch_pass,
        n_groups=len(tasks),
        progress=progress,
        positions=positions,
        committed=neurons.commit if neurons is not None else None,
    )
    if neurons is not None:
        return scores / n_steps, neurons.total / n_steps
    return scores / n_steps
