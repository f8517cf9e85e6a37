"""Read a Hugging Face checkpoint from disk: which files to trust, and the model they hold.

Only formats that cannot run code when read are accepted: safetensors, GGUF, and PyTorch
.bin files through torch.load(weights_only=True). A folder holding only other pickles is
refused with the reason, never loaded.
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from circuitviz.core.text import cut, first_sentence, json_given
from circuitviz.models.errors import ModelLoadError
from circuitviz.models.estimate import size_problem

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

WeightFormat = Literal["safetensors", "gguf", "pytorch-bin"]

# Files that unpickle when read: arbitrary code could run, so they are never loaded.
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".ckpt", ".bin", ".joblib", ".npy")


@dataclass(frozen=True)
class LocalCheckpoint:
    """A checkpoint on disk in a format circuitviz will read.

    folder holds the weights; gguf_file names the .gguf inside it when weights == "gguf".
    """

    folder: Path
    weights: WeightFormat
    gguf_file: str | None = None

    @property
    def gguf_path(self) -> Path:
        """The .gguf file itself (only for weights == "gguf")."""
        if self.gguf_file is None:
            raise ValueError("not a GGUF checkpoint")
        return self.folder / self.gguf_file


def inspect_local_checkpoint(path: Path) -> LocalCheckpoint:
    """Decide how to read the checkpoint at path, or say in one sentence why it can't be read."""
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return LocalCheckpoint(path.parent, "gguf", path.name)
        raise ModelLoadError(
            f"{path} is a single {path.suffix or 'extensionless'} file; give a folder holding "
            "config.json with safetensors weights, or the path of a .gguf file."
        )
    if not path.is_dir():
        raise ModelLoadError(f"Nothing exists at {path}; check the path of the checkpoint folder.")

    files = sorted(entry for entry in path.iterdir() if entry.is_file())
    has_config = (path / "config.json").is_file()
    has_safetensors = any(entry.suffix == ".safetensors" for entry in files)
    has_torch_bin = any(entry.name.startswith("pytorch_model") and entry.suffix == ".bin" for entry in files)
    gguf_files = [entry.name for entry in files if entry.suffix.lower() == ".gguf"]

    if has_config and has_safetensors:
        return LocalCheckpoint(path, "safetensors")
    if has_config and has_torch_bin:
        return LocalCheckpoint(path, "pytorch-bin")
    if len(gguf_files) == 1:
        return LocalCheckpoint(path, "gguf", gguf_files[0])
    if len(gguf_files) > 1:
        raise ModelLoadError(
            f"{path} holds several .gguf files ({', '.join(gguf_files)}); give the path of the one to load."
        )
    if has_safetensors or has_torch_bin:
        raise ModelLoadError(
            f"{path} holds weights but no config.json; add the model's config.json from the "
            "same release next to them."
        )
    pickles = [entry.name for entry in files if entry.suffix.lower() in PICKLE_SUFFIXES]
    if pickles:
        raise ModelLoadError(
            f"{path} holds only pickled weights ({', '.join(pickles[:3])}), which can run "
            "arbitrary code when loaded, so they are refused; convert them to safetensors "
            "(with config.json) or to a .gguf file."
        )
    raise ModelLoadError(
        f"{path} holds no model weights; it needs config.json with *.safetensors "
        "(or pytorch_model.bin), or a single .gguf file."
    )


RELEASE_CONFIG = "; use the config.json of the model's release"  # the way out of a damaged one


def _config_problem(folder: Path) -> str | None:
    """Why ``folder``'s config.json cannot describe a model (one clause, with the way out), or
    None. A damaged file's clause ends with ``RELEASE_CONFIG``: "its config.json is not JSON
    (...)" said what was wrong and no more."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return f"its config.json is not JSON ({first_sentence(error)}){RELEASE_CONFIG}"
    if not isinstance(config, dict):
        return f"its config.json holds {type(config).__name__} where a JSON object belongs{RELEASE_CONFIG}"
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        given = json_given(config.get("model_type"))
        return f'its config.json names no model type ("model_type": {given}){RELEASE_CONFIG}'
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if config["model_type"] not in CONFIG_MAPPING:
        return (
            f"its model type {json_given(config['model_type'])} is not one transformers "
            f"{transformers.__version__} knows (a newer transformers may)"
        )
    problem = size_problem(config, folder)
    return problem + RELEASE_CONFIG if problem else problem


def _require_whole_weights(folder: Path) -> None:
    """One sentence naming the first weights file in ``folder`` that is cut short or not what
    its name says: a .safetensors whose header does not describe exactly its bytes, a .bin that
    begins as torch's zip archive but has no whole one. Read by transformers, they raised "Error
    while deserializing header", "PytorchStreamReader failed" or "[Errno 22] Invalid argument",
    and the sentence around it advised checking the architecture."""
    import zipfile

    from circuitviz.models.cache import safetensors_header_fits

    for path in sorted(folder.glob("*.safetensors")):
        if not safetensors_header_fits(path):
            raise ModelLoadError(
                f"The weights file {path} is damaged or incomplete (its safetensors header does not "
                "describe the file's bytes, as when a download or copy stops early); download or "
                "save the checkpoint again."
            )
    for path in sorted(folder.glob("*.bin")):
        with open(path, "rb") as stream:
            archive = stream.read(4) == b"PK\x03\x04"
        if archive and not zipfile.is_zipfile(path):
            raise ModelLoadError(
                f"The weights file {path} is damaged or incomplete (torch's zip archive has no end, "
                "as when a download or copy stops early); download or save the checkpoint again."
            )


def from_pretrained_checked(folder: Path, **kwargs) -> PreTrainedModel:
    """``AutoModelForCausalLM.from_pretrained(folder, **kwargs)`` with every weight read from the
    files: a config.json that is no model's, a field of the wrong kind, a weight the files lack
    (transformers would leave it random and say so only in its log) or hold in another shape is
    refused in one sentence, never loaded."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoModelForCausalLM

    where = folder / kwargs["gguf_file"] if kwargs.get("gguf_file") else folder  # what the user gave
    if "gguf_file" not in kwargs and "config" not in kwargs:
        problem = _config_problem(folder)
        if problem is not None:
            raise ModelLoadError(f"The checkpoint in {folder} cannot be read: {problem}.")
    if "gguf_file" not in kwargs:
        _require_whole_weights(folder)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(folder), output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
        )
    except StrictDataclassError as error:
        wrong = str(error).strip().splitlines()[-1].strip()
        raise ModelLoadError(
            f"The config.json in {folder} holds a value of the wrong kind "
            f"({cut(wrong, 160)}); correct it from the model's release."
        ) from None
    except pickle.UnpicklingError:
        raise  # read_hf_model names what the pickle held
    except Exception as error:  # noqa: BLE001  (a damaged file raises anything: IndexError, ZeroDivisionError, ...)
        if "PytorchStreamReader" in str(error):  # a .bin archive cut short or not an archive
            raise ModelLoadError(
                f"A weights file in {where} is damaged or incomplete ({first_sentence(error)}); "
                "download or save the checkpoint again."
            ) from error
        raise ModelLoadError(
            f"transformers could not read the checkpoint {where} ({first_sentence(error)}); "
            "check that it is a causal language model the installed transformers supports."
        ) from error
    return require_complete(model, info, where)


def require_complete(model: PreTrainedModel, info: dict, where) -> PreTrainedModel:
    """``model`` when ``from_pretrained``'s loading ``info`` (``output_loading_info=True``,
    ``ignore_mismatched_sizes=True``) shows every weight read in its shape and the weights are
    finite; else one sentence naming the first that is not (``where``: the folder, file or hub id)."""
    missing, mismatched = sorted(info["missing_keys"]), sorted(info["mismatched_keys"])
    if mismatched:
        name, given_shape, wanted = mismatched[0]
        raise ModelLoadError(
            f"The weights in {where} do not fit its config.json: {name} has shape "
            f"{tuple(given_shape)} where the config gives {tuple(wanted)}"
            f"{f' ({len(mismatched)} weights differ)' if len(mismatched) > 1 else ''}; "
            "use the config.json of the same release."
        )
    if missing:
        raise ModelLoadError(
            f"The weights in {where} lack {len(missing):,} of the model's tensors ({missing[0]}"
            f"{', …' if len(missing) > 1 else ''}), which would be left random; copy every weight "
            "file of the release."
        )
    _require_finite_weights(model, where)
    return model


def _require_finite_weights(model: PreTrainedModel, folder) -> None:
    """Refuse weights holding NaN or infinity: every figure of every circuit would be NaN. A
    tensor's sum is finite when every value is (it overflows only past 3e38), so the exact check
    runs only where a sum is not (Gemma-3-270M's 286 M weights: 0.05 s on the CPU against 0.86 s
    for the exact check on every tensor; once per conversion)."""
    import torch

    for name, parameter in model.named_parameters():
        if parameter.device.type == "meta":  # offloaded by a device map: refused after boot, in its own words
            continue
        if not parameter.is_floating_point() or bool(torch.isfinite(parameter.sum())):
            continue
        if not bool(torch.isfinite(parameter).all()):
            raise ModelLoadError(
                f"The weights in {folder} hold values that are not finite (NaN or infinity) in "
                f"{name}; the files are damaged, so copy them again from the release."
            )


def read_hf_model(checkpoint: LocalCheckpoint, config: object | None = None) -> PreTrainedModel:
    """Load the checkpoint with transformers, on the CPU, in float32, with dense weights.

    GGUF weights are dequantised explicitly: a model left with packed GGUF blocks would be
    read by the weight converters as if the packed bytes were weights. Passing config (a
    PretrainedConfig saved earlier) spares transformers a second slow pass over GGUF metadata.
    A GGUF file of an architecture ``gguf_config`` was checked on is read by ``gguf_weights``
    (the same model, bit for bit, without the older loader's passes over the vocabulary).
    """
    import torch
    from transformers import GgufConfig

    common = {"dtype": torch.float32, "trust_remote_code": False, "local_files_only": True}
    if config is None and checkpoint.weights == "gguf":
        model = _read_gguf_directly(checkpoint)
        if model is not None:
            return model
    if config is not None:
        common["config"] = config
    try:
        if checkpoint.weights == "gguf":
            model = from_pretrained_checked(
                checkpoint.folder,
                gguf_file=checkpoint.gguf_file,
                quantization_config=GgufConfig(dequantize=True),
                **common,
            )
        elif checkpoint.weights == "safetensors":
            model = from_pretrained_checked(checkpoint.folder, use_safetensors=True, **common)
        else:
            model = from_pretrained_checked(
                checkpoint.folder, use_safetensors=False, weights_only=True, **common
            )
    except pickle.UnpicklingError:
        raise ModelLoadError(
            f"The pytorch_model.bin in {checkpoint.folder} holds more than plain tensors (objects "
            "that run code when unpickled), so it is refused; convert it to safetensors."
        ) from None
    model.eval()
    model.requires_grad_(False)
    _require_dense_weights(model, checkpoint)
    return model


def _read_gguf_directly(checkpoint: LocalCheckpoint) -> PreTrainedModel | None:
    """The GGUF checkpoint read by ``gguf_weights`` (the embedded models' architectures: a few
    seconds where ``transformers``' older loader took a minute on Gemma 3), or None where that
    reading does not answer for the file or fails (then ``transformers`` reads it, as before)."""
    from circuitviz.models.gguf_weights import read_gguf_model

    try:
        read = read_gguf_model(checkpoint.gguf_path)
    except Exception as error:  # noqa: BLE001  (never a wrong model: the older loader reads it, or refuses)
        logger.warning("Reading %s directly failed (%s); transformers reads it.", checkpoint.gguf_path, error)
        return None
    if read is None:
        return None
    model = require_complete(*read, checkpoint.gguf_path)
    model.eval()
    model.requires_grad_(False)
    _require_dense_weights(model, checkpoint)
    return model


def _require_dense_weights(model: PreTrainedModel, checkpoint: LocalCheckpoint) -> None:
    """Refuse a model whose weights are still packed (integer blocks) rather than floats."""
    for name, parameter in model.named_parameters():
        if not parameter.is_floating_point():
            raise ModelLoadError(
                f"The checkpoint in {checkpoint.folder} loaded with packed {parameter.dtype} "
                f"weights ({name}) that cannot be converted; use a float or GGUF checkpoint."
            )


# the files a tokenizer of transformers is read from (tokenizer.json, tokenizer.model,
# tokenizer_config.json, vocab.json and merges.txt, vocab.txt, spiece.model, *.tiktoken)
_TOKENIZER_FILES = ("tokenizer*", "vocab.*", "merges.txt", "spiece.model", "*.tiktoken")


def _require_tokenizer_files(folder: Path) -> None:
    """One sentence when ``folder`` holds no tokenizer file at all: transformers then tried to
    build one from nothing, and its refusal quoted as "(Couldn't instantiate the backend
    tokenizer from one of:)", the first line of a list."""
    if not any(any(folder.glob(pattern)) for pattern in _TOKENIZER_FILES):
        raise ModelLoadError(
            f"{folder} holds no tokenizer (no tokenizer.json, tokenizer.model or vocab file beside the "
            "weights); add the tokenizer files from the same release (tokenizer.save_pretrained(folder))."
        )


def read_tokenizer(checkpoint: LocalCheckpoint, model_type: str | None = None) -> PreTrainedTokenizerBase:
    """Load the tokenizer that belongs to the checkpoint (embedded in the file for GGUF).

    ``model_type``: the model's, when the caller has read its config already. For a GGUF file,
    ``AutoTokenizer`` reads the file's whole metadata once more only to learn the model type
    (transformers' older GGUF reader, in Python: Gemma-3-270M's 262,144 tokens and 514,906
    merges, about 20 s of the first conversion's 80 on a busy 2-core machine); given the type, it
    picks the same class from it directly, and the tokenizer is the same (tested)."""
    from transformers import AutoTokenizer

    try:
        if checkpoint.weights == "gguf":
            tokenizer = AutoTokenizer.from_pretrained(
                str(checkpoint.folder),
                gguf_file=checkpoint.gguf_file,
                local_files_only=True,
                **_gguf_tokenizer_type(checkpoint, model_type),
            )
        else:
            _require_tokenizer_files(checkpoint.folder)
            tokenizer = AutoTokenizer.from_pretrained(str(checkpoint.folder), local_files_only=True)
    except ModelLoadError:
        raise
    except Exception as error:  # noqa: BLE001  (a damaged tokenizer file raises anything)
        raise ModelLoadError(
            f"No usable tokenizer was found with the checkpoint in {checkpoint.folder} "
            f"({first_sentence(error)}); add the tokenizer files from the same release."
        ) from error
    longest = getattr(tokenizer, "model_max_length", None)
    if isinstance(longest, bool) or not isinstance(longest, (int, float)) or not longest > 0:
        raise ModelLoadError(
            f"The tokenizer_config.json in {checkpoint.folder} gives model_max_length "
            f"{json_given(longest)}, not a number of tokens; correct it from the model's release."
        )
    return tokenizer


def _gguf_tokenizer_type(checkpoint: LocalCheckpoint, model_type: str | None) -> dict:
    """``{"tokenizer_type": model_type}`` where that names the class ``AutoTokenizer`` would pick
    from the model type itself: a type transformers maps to a tokenizer class, and no
    tokenizer_config.json beside the file (whose ``tokenizer_class`` would come first); else {}."""
    if not model_type or (checkpoint.folder / "tokenizer_config.json").exists():
        return {}
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    return {"tokenizer_type": model_type} if model_type in TOKENIZER_MAPPING_NAMES else {}


def load_saved_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    """Load a tokenizer that circuitviz saved itself (in its conversion cache)."""
    return saved_tokenizer_loader(folder)()


# transformers resolves ``AutoTokenizer`` lazily, importing its module on first use: a second
# thread asking for it while the first is still importing that module got the module half built,
# "ImportError: cannot import name 'AutoTokenizer' from 'transformers'" (two models loading at
# once: the app's start loads Gemma-3-270M, and a SmolLM2-135M link opened in its first second
# failed; 4 of 4 fresh processes with eight threads). The first import is made one thread at a time
_TOKENIZER_IMPORT = threading.Lock()


def saved_tokenizer_loader(folder: Path) -> Callable[[], PreTrainedTokenizerBase]:
    """What loads a tokenizer circuitviz saved itself, its classes imported already (so another
    thread may call it while this one imports more of transformers).

    When the tokenizer has a BOS token it is loaded with add_bos_token=True, which is the
    form HookedTransformer would otherwise reload it in. A fast tokenizer is built straight
    from its tokenizer.json as the class its config names: AutoTokenizer would first parse that
    file in Python and rebuild it from its vocabulary (Gemma's 262k tokens: 3.1 s against 1.2 s).
    The tokenizers library holds the GIL while it builds (0.23: Python threads beside it get about
    12 % of their work done), so that second does not overlap the rest of a load. Anything else,
    or a file that does not build, goes through AutoTokenizer.
    """
    with _TOKENIZER_IMPORT:
        from transformers import AutoTokenizer

    config_file = folder / "tokenizer_config.json"
    settings = json.loads(config_file.read_text()) if config_file.is_file() else {}
    extra = {"add_bos_token": True} if settings.get("bos_token") else {}
    tokenizer_class = _fast_tokenizer_class(settings.get("tokenizer_class"))
    tokenizer_file = folder / "tokenizer.json"

    def load() -> PreTrainedTokenizerBase:
        if tokenizer_class is not None and tokenizer_file.is_file():
            saved = {k: v for k, v in settings.items() if k not in _NOT_TOKENIZER_SETTINGS}
            try:
                return tokenizer_class(
                    tokenizer_file=str(tokenizer_file), name_or_path=str(folder), **saved, **extra
                )
            except Exception as error:  # noqa: BLE001  (AutoTokenizer below still reads the folder)
                logger.debug("Building the tokenizer in %s directly failed (%s).", folder, error)
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **extra)

    return load


# tokenizer_config.json entries that say how the file was written, not how the tokenizer works
_NOT_TOKENIZER_SETTINGS = ("tokenizer_class", "backend", "is_local", "local_files_only", "auto_map")


def _fast_tokenizer_class(name: str | None):
    """The transformers class a saved config names, when it is a fast (tokenizers) one."""
    import transformers
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    found = getattr(transformers, name, None) if isinstance(name, str) and name.isidentifier() else None
    return found if isinstance(found, type) and issubclass(found, TokenizersBackend) else None
