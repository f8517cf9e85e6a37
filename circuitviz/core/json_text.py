"""``json.loads`` for text a user gave (a dataset, a paraphrase list, a circuit or graph file).

Python reads a whole number of at most 4,300 digits (``sys.get_int_max_str_digits``); a JSON text
holding a longer one raised a plain ValueError ("Exceeds the limit (4300 digits) for integer string
conversion ...; use sys.set_int_max_str_digits() to increase the limit"), which the readers, each
catching ``json.JSONDecodeError`` to say in one sentence that the text is not JSON, let through:
a traceback on the Dataset page's upload, the Paraphrases page and the graph file uploader, and
Python's advice on the command line (2026-12-06). Here it is the JSONDecodeError it is to a reader,
naming the number and where it starts. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys


def loads(text: str):
    """``json.loads(text)``; a number longer than Python reads raised as ``json.JSONDecodeError``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        limit = sys.get_int_max_str_digits()
        found = re.search(rf"\d{{{limit + 1},}}", text) if limit else None
        if found is None:
            raise
        raise json.JSONDecodeError(
            f"a number of {len(found.group()):,} digits, over the {limit:,} that can be read",
            text,
            found.start(),
        ) from None
