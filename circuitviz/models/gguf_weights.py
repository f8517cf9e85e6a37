"""A GGUF file's dense weights, read without ``transformers``' older GGUF reader.

After the config's pass (``gguf_config``), the cold conversion still spent most of its time in
``transformers``' older loader reading the weights: the ``gguf`` package's reader walks every
metadata value in Python (Gemma 3's 262,144 tokens and 514,906 merges again), and the map from
GGUF tensor names to the model's is rebuilt from llama.cpp's name table once for every submodule
of the model (a few hundred times, where the model's top level alone gives every name). This
module does what that loader does, tensor for tensor, with the same pieces: ``transformers``'
newer reader for the tensor table (no metadata strings read), the ``gguf`` package's own
``dequantize``, ``transformers``' tensor processor for the architecture (Llama's q/k
permutation, Gemma's norms stored as ``w + 1``) and its name map, built once on the model's top
level. ``tests/test_gguf_config.py`` checks every weight equal, bit for bit, to the older loader's
on both embedded files.

Only for the architectures ``gguf_config`` rebuilds (its config dict is the processors' input)
and tensors stored as F32, F16 or a block type the ``gguf`` package dequantises (the older loader
cannot read others either); anything else returns None and ``transformers`` reads the file as
before.
"""

from __future__ import annotations

from pathlib import Path

F32, F16 = 0, 1  # ggml's type ids of the plain float tensors
# the fixed widths of GGUF's metadata value types (8 is a string, 9 an array)
_WIDTH = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_ALIGNMENT = "general.alignment"


def tensor_table(path: Path) -> tuple[list[tuple[str, tuple[int, ...], int, int]], int, object]:
    """(each tensor's name, shape in torch order, ggml type and offset in the data section; where
    the data section starts; the file as a read-only byte map), from the file's header. Metadata
    values are stepped over (only the alignment is read), so no string of the vocabulary is made."""
    import struct

    import numpy as np

    blob = np.memmap(path, mode="r", dtype=np.uint8)
    magic, _version, n_tensors, n_values = struct.unpack_from("<4sIQQ", blob, 0)
    if magic != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    pos, alignment = 24, 32

    def string(at: int) -> tuple[str, int]:
        (length,) = struct.unpack_from("<Q", blob, at)
        return bytes(blob[at + 8 : at + 8 + length]).decode("utf-8"), at + 8 + length

    for _ in range(n_values):
        key, pos = string(pos)
        (kind,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        if kind == 8:
            (length,) = struct.unpack_from("<Q", blob, pos)
            pos += 8 + length
        elif kind == 9:
            element, count = struct.unpack_from("<IQ", blob, pos)
            pos += 12
            if element == 8:
                for _ in range(count):
                    (length,) = struct.unpack_from("<Q", blob, pos)
                    pos += 8 + length
            else:
                pos += count * _WIDTH[element]
        else:
            if key == _ALIGNMENT:
                (alignment,) = struct.unpack_from("<I", blob, pos)
            pos += _WIDTH[kind]
    tensors = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (n_dims,) = struct.unpack_from("<I", blob, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", blob, pos + 4)
        kind, offset = struct.unpack_from("<IQ", blob, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        tensors.append((name, tuple(int(d) for d in reversed(dims)), int(kind), int(offset)))
    return tensors, (pos + alignment - 1) // alignment * alignment, blob


class _TopLevel:
    """The model as ``get_gguf_hf_weights_map`` reads it, without its submodules: their names are
    the top level's with a prefix, which the map already holds (checked equal to the full map)."""

    def __init__(self, model):
        self.config = model.config
        self._model = model

    def state_dict(self):
        return self._model.state_dict()

    def named_children(self):
        return ()


def gguf_state_dict(path: Path, architecture: str, config_dict: dict, model) -> dict | None:
    """``{model name: float32 tensor on the CPU}`` of every tensor the older loader keeps, or None
    where a tensor's type is one the ``gguf`` package cannot dequantise. ``architecture``: llama.cpp's
    name of it (the file's ``general.architecture``); ``model``: the model the weights are for (on
    the meta device will do: only its names and config are read)."""
    from math import prod

    import numpy as np
    import torch
    from gguf import dequantize
    from gguf.constants import GGML_QUANT_SIZES
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    table, data_start, blob = tensor_table(path)
    sizes = {int(kind): size for kind, size in GGML_QUANT_SIZES.items()}
    if any(kind not in sizes for _, _, kind, _ in table):
        return None
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=config_dict)
    names = get_gguf_hf_weights_map(_TopLevel(model), processor)
    # what the older loader hands its processors: the config, and the tokenizer's parts (unused
    # by the checked architectures' processors, which read and write only the config)
    parsed = {"ignore": {}, "config": config_dict, "tokenizer": {}, "tokenizer_config": {}}
    tensors = {}
    for name, shape, kind, offset in table:
        block, width = sizes[kind]
        start = data_start + offset
        raw = blob[start : start + prod(shape) // block * width]
        if kind == F32:
            data = raw.view(np.float32).reshape(shape)
        elif kind == F16:
            data = raw.view(np.float16).reshape(shape)
        else:  # rows of blocks, as the gguf package's reader gives them to its dequantize
            data = raw.reshape(*shape[:-1], shape[-1] // block * width)
        try:
            weights = dequantize(data, kind)
        except NotImplementedError:  # a block type the gguf package cannot dequantise
            return None
        result = processor.process(
            weights=weights,
            name=name,
            tensor_key_mapping=names,
            parsed_parameters=parsed,
        )
        if result.name not in names:
            continue
        tensors[names[result.name]] = torch.from_numpy(np.copy(result.weights)).to(torch.float32)
    return tensors


def read_gguf_model(path: Path):
    """(the ``transformers`` model of the GGUF file at ``path``, dense, float32, on the CPU, with the
    loading info ``from_pretrained`` gives), or None where ``gguf_config`` or ``gguf_state_dict``
    does not answer for this file."""
    import torch
    from transformers import AutoModelForCausalLM

    from circuitviz.models.gguf_config import CHECKED_ARCHITECTURES, config_of, gguf_config_dict

    config_dict = gguf_config_dict(path)
    if config_dict is None:
        return None
    config = config_of(config_dict)
    model_class = AutoModelForCausalLM._model_mapping[type(config)]
    with torch.device("meta"):
        skeleton = model_class(config)
    architecture = next(name for name, kind in CHECKED_ARCHITECTURES.items() if kind == config.model_type)
    tensors = gguf_state_dict(path, architecture, dict(config_dict), skeleton)
    if tensors is None:
        return None
    model, info = model_class.from_pretrained(
        None,
        config=config,
        state_dict=tensors,
        dtype=torch.float32,
        output_loading_info=True,
        ignore_mismatched_sizes=True,
    )
    model.config._name_or_path = str(path.parent)  # as from_pretrained names a GGUF file's folder
    return model, info
