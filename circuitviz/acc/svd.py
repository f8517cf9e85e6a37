"""Each head's query-key bilinear form, folded, and its one SVD, cached on disk per model.

A head's attention score between destination d and source j is ``q_d . k_j / scale`` with
``q_d = nq_d R_d (W_Q''^T x_d + b_Q'')`` and ``k_j = nk_j R_j (W_K''^T x_j + b_K'')``, where x is
the residual stream divided by the pre-attention norm's scale (frozen at this forward pass),
``W''`` are the projections with everything constant folded in: the pre-attention norm's weight
(and its centring, so ``W''^T x`` never needs the centred residual), Gemma-3's q/k-norm weight,
and biases (``b''``). ``nq``/``nk`` are the q/k-norm's per-position scales and ``R_j`` the rotary
map: constants of one forward pass (``PositionOperators``).

``Omega = W_Q'' W_K''^T = U diag(sigma) V^T`` is the head's bilinear form in the residual stream.
Everything ACC++ needs from it lives in head space (``R = d_head`` dimensions): with
``A = W_Q''^+ U`` and ``B = W_K''^+ V`` (R x R), ``A diag(sigma) B^T = I``, so for any query and
key vectors ``q . k = sum_k sigma_k (A^T q)_k (B^T k)_k``. The coordinate ``(A^T q)_k`` is the
paper's ``x^T M_d u_k`` (its position operator ``M_d = W_Q R_d W_Q^+`` applied implicitly), so no
``d_model x d_model`` matrix is ever formed. The residual-stream singular vectors are
``U = W_Q'' A`` and ``V = W_K'' B``; in head space the query direction of singular direction k
is ``sigma_k B[:, k]`` and the key direction ``sigma_k A[:, k]``.

A q/k-norm weight that is exactly zero (the embedded quantised Gemma-3 has one to seven per
layer) makes that head-space dimension dead before the rotation. Folded as zero it would make
``W''`` rank-deficient and the paper's pseudo-inverse fold inexact (the rotation moves the
query into the dead dimension); such a dimension is folded with weight 1 for the SVD and
zeroed by ``keep_q``/``keep_k`` in the head-space projection instead, which keeps every score
exact.

The cache holds only ``A``, ``B`` and ``sigma`` per head, in the model's dtype (computed in
float64): for Gemma-3-270M 38 MB, for GPT-2 small 4.7 MB. A head whose folded projection is
rank-deficient (a planted model's idle head) keeps the exact decomposition with ``A = B = I``,
``sigma = 1``: its "directions" are then head-space coordinates, flagged ``degenerate``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.phases import Report
from ..models.adapter import adapter_of
from ..services import assets

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
# a folded projection whose smallest/largest singular value ratio is below this is rank-deficient
_RANK_TOLERANCE = 1e-9

_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MEMORY_GUARD = threading.Lock()
_PRICED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> fingerprint (svd_ready)


def compute_dtype(model) -> torch.dtype:
    """float64 for float64 models (tests), else float32 (half-precision models compute in float32)."""
    dtype = next(model.parameters()).dtype
    return torch.float64 if dtype == torch.float64 else torch.float32


def cache_dir() -> Path:
    """``$CIRCUITVIZ_CACHE/acc``, else ``~/.cache/circuitviz/acc``."""
    return assets.cache_dir("acc")


# ----- folding --------------------------------------------------------------------------------
def pre_attention_norm(model, layer: int):
    """The norm a layer applies to the residual before its q/k projections, or None."""
    return adapter_of(model).pre_attention_norm(layer)


def is_centring(norm) -> bool:
    """LayerNorm (and LayerNormPre) subtract the mean; RMSNorm does not."""
    return norm is not None and "LayerNorm" in type(norm).__name__


def _centre_rows(matrix: torch.Tensor) -> torch.Tensor:
    """Project the d_model axis (rows) onto the mean-free subspace.  # [..., d_model, R]"""
    return matrix - matrix.mean(dim=-2, keepdim=True)


@dataclass(frozen=True)
class FoldedLayer:
    """A layer's q/k projections with the norms' weights, centring and biases folded in.

    w_q, w_k: [n_heads, d_model, R], full rank where the weights allow (the SVD's input);
    keep_q, keep_k: [R], 0 on dimensions a q/k-norm weight zeroes, else 1 (a head's share of the
    query is ``(W_Q^T x) * keep_q``); b_q, b_k: [n_heads, R] (added in head space before the
    q/k-norm scale and the rotation, already zero on dead dimensions).
    """

    w_q: torch.Tensor
    w_k: torch.Tensor
    b_q: torch.Tensor
    b_k: torch.Tensor
    keep_q: torch.Tensor
    keep_k: torch.Tensor


def fold_layer(model, layer: int, dtype: torch.dtype | None = None) -> FoldedLayer:
    """The folded projections of every head of ``layer`` (see the module docstring)."""
    dtype = dtype or compute_dtype(model)
    attn = adapter_of(model).attention(layer)
    home = adapter_of(model).device  # a split model's layer may sit on another: folded at home
    w_q = attn.W_Q.detach().to(home, dtype)  # [n_heads, d_model, R]
    w_k = attn.W_K.detach().to(home, dtype)
    b_q = attn.b_Q.detach().to(home, dtype)  # [n_heads, R]
    b_k = attn.b_K.detach().to(home, dtype)
    norm = pre_attention_norm(model, layer)
    if norm is not None:
        weight = getattr(norm, "w", None)
        bias = getattr(norm, "b", None)
        if bias is not None:  # the norm's bias enters every position like b_Q does
            b_q = b_q + torch.einsum("m,hmr->hr", bias.detach().to(home, dtype), w_q)
            b_k = b_k + torch.einsum("m,hmr->hr", bias.detach().to(home, dtype), w_k)
        if weight is not None:
            w_q = w_q * weight.detach().to(home, dtype)[None, :, None]
            w_k = w_k * weight.detach().to(home, dtype)[None, :, None]
        if is_centring(norm):
            w_q, w_k = _centre_rows(w_q), _centre_rows(w_k)
    keep_q = torch.ones(w_q.shape[-1], dtype=dtype, device=w_q.device)
    keep_k = keep_q.clone()
    if getattr(model.cfg, "use_qk_norm", False) and attn.q_norm is not None:
        q_weight = getattr(attn.q_norm, "w", None)
        k_weight = getattr(attn.k_norm, "w", None)
        if q_weight is not None:
            w_q, b_q, keep_q = _fold_norm_weight(w_q, b_q, q_weight.detach().to(home, dtype))
        if k_weight is not None:
            w_k, b_k, keep_k = _fold_norm_weight(w_k, b_k, k_weight.detach().to(home, dtype))
    return FoldedLayer(w_q=w_q, w_k=w_k, b_q=b_q, b_k=b_k, keep_q=keep_q, keep_k=keep_k)


def _fold_norm_weight(w: torch.Tensor, b: torch.Tensor, weight: torch.Tensor):
    """Fold a q/k-norm weight into a projection; an exactly-zero weight is folded as 1 and masked."""
    dead = weight == 0
    return w * torch.where(dead, torch.ones_like(weight), weight), b * weight, (~dead).to(weight.dtype)


# ----- the SVD ----------------------------------------------------------------------------------
@dataclass
class HeadSVD:
    """Per head: A = W_Q''^+ U, B = W_K''^+ V (R x R) and sigma, for every layer.

    a, b: [n_layers, n_heads, R, R]; sigma: [n_layers, n_heads, R] (descending);
    degenerate: [n_layers, n_heads] bool. Tensors in the model's dtype on the CPU.
    """

    a: torch.Tensor
    b: torch.Tensor
    sigma: torch.Tensor
    degenerate: torch.Tensor
    fingerprint: str
    cached: bool = False  # read from disk (or memory) rather than computed now
    path: str = ""
    seconds: float = 0.0

    @property
    def n_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.a, self.b, self.sigma, self.degenerate))

    def head(self, layer: int, head: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, ...]:
        """(A, B, sigma) of one head in ``dtype`` on ``device``."""
        return tuple(t[layer, head].to(device=device, dtype=dtype) for t in (self.a, self.b, self.sigma))


def head_factors(
    w_q: torch.Tensor, w_k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """(A, B, sigma, degenerate) of one head from its folded projections [d_model, R] (float64).

    Omega = W_Q W_K^T is never formed: with W_Q = Q_q R_q and W_K = Q_k R_k (reduced QR),
    R_q R_k^T = U' S V'^T gives U = Q_q U', V = Q_k V', A = R_q^-1 U', B = R_k^-1 V'.
    """
    w_q, w_k = w_q.double(), w_k.double()
    q_q, r_q = torch.linalg.qr(w_q)
    q_k, r_k = torch.linalg.qr(w_k)
    size = w_q.shape[1]

    def well_conditioned(r: torch.Tensor) -> bool:
        values = torch.linalg.svdvals(r)
        return bool(values[0] > 0 and values[-1] / values[0] > _RANK_TOLERANCE)

    if not (well_conditioned(r_q) and well_conditioned(r_k)):
        eye = torch.eye(size, dtype=torch.float64)
        return eye, eye.clone(), torch.ones(size, dtype=torch.float64), True
    u, sigma, vh = torch.linalg.svd(r_q @ r_k.T)
    a = torch.linalg.solve_triangular(r_q, u, upper=True)
    b = torch.linalg.solve_triangular(r_k, vh.T, upper=True)
    return a, b, sigma, False


def model_fingerprint(model) -> str:
    """A hash of everything the folded forms depend on (weights, norms, shapes, dtype)."""
    digest = hashlib.blake2b(digest_size=16)
    cfg = model.cfg
    digest.update(
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "name": str(getattr(cfg, "model_name", "")),
                "shape": [cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head],
                "dtype": str(next(model.parameters()).dtype),
                "norm": str(cfg.normalization_type),
                "qk_norm": bool(getattr(cfg, "use_qk_norm", False)),
            },
            sort_keys=True,
        ).encode()
    )
    for layer in range(cfg.n_layers):
        for tensor in _folded_parameters(model, layer):
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _folded_parameters(model, layer: int) -> list[torch.Tensor]:
    """The parameters a layer's folded forms are made of (the key weights before GQA's repeat)."""
    attn = adapter_of(model).attention(layer)
    stored_w_k, stored_b_k = attn.stored_keys
    parameters = [attn.W_Q, stored_w_k, attn.b_Q, stored_b_k]
    norm = pre_attention_norm(model, layer)
    for module in (norm, attn.q_norm, attn.k_norm):
        if module is not None:
            parameters += [getattr(module, "w", None), getattr(module, "b", None)]
    return [p for p in parameters if isinstance(p, torch.Tensor)]


@contextmanager
def _single_threaded():
    """Run small LAPACK factorisations on one thread.

    A 256 x 256 SVD gains nothing from threads, and on a busy machine OpenMP's waiting threads
    made the 72 Gemma-3 factorisations take minutes instead of seconds (measured: 137 s vs 6 s).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def compute_svd(model, progress=None) -> HeadSVD:
    """Fold and factor every head of ``model`` (float64 arithmetic, stored in the model's dtype);
    ``progress`` hears of each head (``Report.SVD``): 72 factorisations, 12 s on Gemma-3-270M's
    first run, were one silent step that the app's Cancel waited for."""
    with _single_threaded():
        return _compute_svd(model, progress)


def _compute_svd(model, progress=None) -> HeadSVD:
    cfg = model.cfg
    dtype = next(model.parameters()).dtype
    a = torch.empty(cfg.n_layers, cfg.n_heads, cfg.d_head, cfg.d_head, dtype=dtype)
    b = torch.empty_like(a)
    sigma = torch.empty(cfg.n_layers, cfg.n_heads, cfg.d_head, dtype=dtype)
    degenerate = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.bool)
    for layer in range(cfg.n_layers):
        folded = fold_layer(model, layer, dtype=torch.float64)
        for head in range(cfg.n_heads):
            factors = head_factors(folded.w_q[head].cpu(), folded.w_k[head].cpu())
            a[layer, head], b[layer, head], sigma[layer, head] = (t.to(dtype) for t in factors[:3])
            degenerate[layer, head] = factors[3]
            if progress is not None:
                progress(Report.SVD, (layer * cfg.n_heads + head + 1) / (cfg.n_layers * cfg.n_heads))
    return HeadSVD(a=a, b=b, sigma=sigma, degenerate=degenerate, fingerprint="")


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "model"


def _read(path: Path, fingerprint: str) -> HeadSVD | None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            if metadata.get("fingerprint") != fingerprint:
                return None
            tensors = {key: handle.get_tensor(key) for key in ("a", "b", "sigma", "degenerate")}
    except (OSError, ValueError, RuntimeError, KeyError) as error:
        log.warning("ACC++ SVD cache %s is unreadable (%s); recomputing it.", path, error)
        return None
    return HeadSVD(
        a=tensors["a"],
        b=tensors["b"],
        sigma=tensors["sigma"],
        degenerate=tensors["degenerate"].bool(),
        fingerprint=fingerprint,
        cached=True,
        path=str(path),
    )


def _write(path: Path, svd: HeadSVD) -> None:
    """Write atomically (temporary file, then rename), so a reader never sees half a file."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".svd-", suffix=".tmp")
    os.close(handle)
    try:
        save_file(
            {
                "a": svd.a.contiguous(),
                "b": svd.b.contiguous(),
                "sigma": svd.sigma.contiguous(),
                "degenerate": svd.degenerate.to(torch.uint8).contiguous(),
            },
            temporary,
            metadata={"fingerprint": svd.fingerprint, "format": str(CACHE_FORMAT)},
        )
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


# seconds per (layer x head x d_model x d_head^2) of ``compute_svd``, float64 on one CPU thread:
# Gemma-3-270M 1.98e-9 (5.97 s), SmolLM2-135M 2.27e-9 (1.45 s), this machine, 2026-12-06
SVD_SECONDS_PER_UNIT = 2.2e-9


def svd_seconds(model) -> float:
    """About how long ``compute_svd`` takes on ``model`` (it folds and factors every head on the
    CPU, whatever the model's device)."""
    cfg = model.cfg
    return SVD_SECONDS_PER_UNIT * cfg.n_layers * cfg.n_heads * cfg.d_model * cfg.d_head**2


def _path(model, directory: str | Path | None, fingerprint: str) -> Path:
    path = Path(directory) if directory is not None else cache_dir()
    return path / f"{_slug(str(getattr(model.cfg, 'model_name', 'model')))}-{fingerprint}.safetensors"


def svd_ready(model, directory: str | Path | None = None) -> bool:
    """Whether ``load_svd`` finds the model's factors (in memory or on disk) rather than computing
    them: what an estimate asks before a model's first ACC++ run. Hashes the weights (0.1 s on
    Gemma-3-270M) once per model object until the factors are in memory (a page prices a run at
    every rerun; ``load_svd`` hashes them again for itself)."""
    with _MEMORY_GUARD:
        if _MEMORY.get(model) is not None:
            return True
        fingerprint = _PRICED.get(model)
    if fingerprint is None:
        fingerprint = model_fingerprint(model)
        with _MEMORY_GUARD:
            _PRICED[model] = fingerprint
    return _path(model, directory, fingerprint).exists()


def load_svd(model, directory: str | Path | None = None, use_disk: bool = True, progress=None) -> HeadSVD:
    """The model's per-head factors: from memory, else from disk, else computed (and stored).

    The file is named by the model's name and a hash of its folded weights, so a changed model
    never reads stale factors. ``use_disk=False`` keeps them in memory only. ``progress``: the
    run's, told of each head computed (nothing is stored of a computation it stops).
    """
    import time

    start = time.perf_counter()
    with _MEMORY_GUARD:
        remembered = _MEMORY.get(model)
    fingerprint = model_fingerprint(model)
    if remembered is not None and remembered.fingerprint == fingerprint:
        remembered.cached, remembered.seconds = True, time.perf_counter() - start
        return remembered
    path = _path(model, directory, fingerprint)
    svd = _read(path, fingerprint) if use_disk and path.exists() else None
    if svd is None:
        svd = compute_svd(model, progress)
        svd.fingerprint = fingerprint
        if use_disk:
            try:
                _write(path, svd)
                svd.path = str(path)
            except OSError as error:
                log.warning("Could not store the ACC++ SVD cache at %s (%s).", path, error)
    svd.seconds = time.perf_counter() - start
    with _MEMORY_GUARD:
        _MEMORY[model] = svd
    return svd


def residual_directions(model, svd: HeadSVD, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The singular vectors of head (layer, head) in the residual stream: (U, V), [d_model, R] each.

    These are what a signal's label describes (the paper pairs a query signal p with
    ``Omega^T p``). Columns are orthonormal unless the head is degenerate.
    """
    dtype = compute_dtype(model)
    folded = fold_layer(model, layer, dtype=dtype)
    a, b, _ = svd.head(layer, head, dtype, folded.w_q.device)
    return folded.w_q[head] @ a, folded.w_k[head] @ b
