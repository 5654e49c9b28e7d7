"""The one spelling hint of the book: ``did you mean 'batch_size'?``.

Unknown commands, config keys, values and profiles, notebook and ``-p`` parameters
all say it the same way. A leaf module: the config layer and the command line both
use it, and neither has to import the other for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'batch_size'?)"`` for the candidate closest to a mistyped ``word``,
    or ``""`` when none is close: the same word in another case first, else difflib's
    closest with a similarity of at least 0.6."""
    names = list(candidates)
    folded = [name for name in names if name.casefold() == word.casefold()]
    close = folded or difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
