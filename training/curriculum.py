"""A curriculum that follows the agent: the next generated world's level from its recent results.

The level moves up when the agent solves most of its last ``window`` worlds and down
when it solves few, so its success rate stays near ``target``; worlds come from the
``train`` split only, each level's in id order (so two runs of the same agent see the
same worlds in the same order). One curriculum per learner: an OpenEnv session or a
TRL environment keeps its own. Every choice says why (``Choice``), for the record.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..scenarios.generator import LEVELS, ids
from ..scenarios.worlds import held_out

SOLVED = 0.999
"""a reward counted as solved (the verdict gives 1.0 exactly; a float is never compared for ==)"""


@dataclass(frozen=True)
class Choice:
    task_id: str
    level: int
    why: str
    """``start``, ``up``/``down`` (after a success rate), ``hold``, or ``fixed`` (a level asked for)"""
    rate: float | None
    """the success rate over the window that decided it; None before a window is full"""


@dataclass
class Curriculum:
    target: float = 0.5
    window: int = 8
    level: int = 1
    margin: float = 0.25
    """move when the window's success rate is this far from ``target``"""
    _results: deque[bool] = field(default_factory=deque, repr=False)
    _served: dict[int, int] = field(default_factory=dict, repr=False)
    _why: str = "start"
    _decided: float | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {sorted(LEVELS)} (got {self.level})")
        if not 0 < self.target < 1 or self.window < 1:
            raise ValueError("target must be in (0, 1) and window at least 1")
        self._results = deque(maxlen=self.window)

    @property
    def rate(self) -> float | None:
        full = len(self._results) == self.window
        return sum(self._results) / self.window if full else None

    def record(self, choice: Choice, reward: float | None) -> None:
        """The reward of a world it chose (None: the episode was invalid, which says nothing of
        the agent); a world of a fixed level moves nothing."""
        if reward is None or choice.why == "fixed":
            return
        self._results.append(reward >= SOLVED)
        rate = self.rate
        if rate is None:
            self._why, self._decided = "hold", None
            return
        step = 1 if rate >= self.target + self.margin else -1 if rate <= self.target - self.margin else 0
        moved = min(max(self.level + step, min(LEVELS)), max(LEVELS))
        self._decided = rate
        self._why = "hold" if moved == self.level else ("up" if moved > self.level else "down")
        if moved != self.level:
            self.level = moved
            self._results.clear()  # a new level is judged on its own results

    def next(self, level: int | str = "auto") -> Choice:
        """The next train world at the curriculum's level (``"auto"``) or at a fixed one;
        each level's ids in order, none served twice."""
        fixed = level != "auto"
        if fixed and (not str(level).isdigit() or int(level) not in LEVELS):
            raise ValueError(f'level must be "auto" or one of {sorted(LEVELS)} (got {level!r})')
        at = int(level) if fixed else self.level
        served = self._served.get(at, 0)
        *_, task_id = ids(at, served + 1, "train", held_out())
        self._served[at] = served + 1
        if fixed:
            return Choice(task_id, at, "fixed", None)
        # the full window's rate that decided the level (kept across the move, which clears it)
        return Choice(task_id, at, self._why, self._decided if self._why != "start" else None)
