"""The one exception a user can cause while choosing or loading a model."""


class ModelLoadError(Exception):
    """A model could not be found, read, converted or placed on the requested device.

    The message is a single sentence saying what failed and what to do instead, so the UI and
    the command line can show it to the user unchanged.
    """


# What a user who asked for HookedTransformer does instead, in the API's words and the command line's.
USE_THE_BRIDGE = "load it with backend='bridge' (on the command line, --backend bridge or no --backend)"


class ConversionRefused(ModelLoadError):
    """TransformerLens's HookedTransformer cannot convert a checkpoint the bridge may still boot
    (an architecture or shape it has no converter for); ``reason`` says why in a few words."""

    def __init__(self, message: str, reason: str, bridge_may_load: bool = True):
        super().__init__(message)
        self.reason = reason
        self.bridge_may_load = bridge_may_load  # False: the bridge has no adapter for it either
