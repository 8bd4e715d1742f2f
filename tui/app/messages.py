"""Messages the dashboard's widgets send each other."""

from __future__ import annotations

from textual.message import Message


class PartitionSelected(Message):
    """The table's cursor is on another partition."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class FollowChanged(Message):
    """Follow mode was turned on or off."""

    def __init__(self, following: bool) -> None:
        super().__init__()
        self.following = following
