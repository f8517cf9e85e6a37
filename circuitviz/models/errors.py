"""The one exception a user can cause while choosing or loading a model."""


class ModelLoadError(Exception):
    """A model could not be found, read, converted or placed on the requested device.

    The message is a single sentence saying what failed and what to do instead, so the UI and
    the command line can show it to the user unchanged.
    """
