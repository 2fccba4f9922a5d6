"""A parser's warnings, bounded (issue 26): its own module, importing nothing, so that a parser that
needs only this (prom_text in a fresh process) does not import ``observe.limits`` and ``typing``."""

from __future__ import annotations

__all__ = ["WarningList"]


class WarningList(list):  # type: ignore[type-arg]
    """A parser's warnings, bounded: the first ``keep`` are kept word for word, the rest only counted
    (``dropped``) and summed up in one last line by :meth:`summary` — a file of ten million bad lines
    cannot hold ten million warnings."""

    def __init__(self, keep: int = 100) -> None:
        super().__init__()
        self.keep = keep
        self.dropped = 0

    def append(self, item: object) -> None:
        if len(self) < self.keep:
            super().append(item)
        else:
            self.dropped += 1

    def extend(self, items: object) -> None:
        for x in items:  # type: ignore[attr-defined]
            self.append(x)

    def summary(self) -> list[str]:
        """The kept warnings and, when some were dropped, one line counting them."""
        out = list(self)
        if self.dropped:
            out.append(f"... and {self.dropped:,} more warnings of the same file")
        return out
