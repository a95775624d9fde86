"""The curriculum follows the agent: up when it succeeds, down when it fails, train worlds only."""

from __future__ import annotations

import pytest

from fixos.scenarios.worlds import split
from fixos.training.curriculum import Curriculum


def _serve(curriculum: Curriculum, rewards: list[float]) -> list[int]:
    levels = []
    for reward in rewards:
        choice = curriculum.next()
        levels.append(choice.level)
        assert split(choice.task_id) == "train"
        assert choice.task_id.startswith(f"gen:{choice.level}:")
        curriculum.record(choice, reward)
    return levels


def test_it_moves_up_when_the_agent_succeeds_and_down_when_it_fails():
    curriculum = Curriculum(window=4)
    levels = _serve(curriculum, [1.0] * 12)
    assert levels == [1] * 4 + [2] * 4 + [3] * 4 and curriculum.level == 4
    moved = curriculum.next()
    assert (moved.why, moved.rate) == ("up", 1.0)  # the rate that decided it, kept across the move
    levels = _serve(curriculum, [0.0] * 8)
    assert levels == [4] * 4 + [3] * 4 and curriculum.level == 2


def test_it_holds_near_the_target_and_never_leaves_the_levels():
    curriculum = Curriculum(window=4, level=5)
    _serve(curriculum, [1.0] * 8)
    assert curriculum.level == 5
    _serve(curriculum, [1.0, 0.0] * 4)  # half solved: the target
    assert curriculum.level == 5
    bottom = Curriculum(window=2)
    _serve(bottom, [0.0] * 6)
    assert bottom.level == 1


def test_a_partial_score_is_not_a_success_and_an_invalid_episode_says_nothing():
    curriculum = Curriculum(window=2)
    _serve(curriculum, [0.9, 0.99])
    assert curriculum.level == 1 and curriculum.rate == 0.0
    _serve(curriculum, [1.0])
    for _ in range(5):
        curriculum.record(curriculum.next(), None)
    assert curriculum.rate == 0.5


def test_worlds_are_served_in_order_never_twice_and_fixed_levels_move_nothing():
    curriculum = Curriculum(window=2)
    fixed = [curriculum.next(3) for _ in range(4)]
    assert len({c.task_id for c in fixed}) == 4 and all(c.level == 3 and c.why == "fixed" for c in fixed)
    for choice in fixed:
        curriculum.record(choice, 1.0)
    assert curriculum.level == 1
    again = Curriculum(window=2)
    assert [again.next(3).task_id for _ in range(4)] == [c.task_id for c in fixed]  # same order, any run


def test_a_wrong_level_is_refused_naming_it():
    with pytest.raises(ValueError, match="got 7"):
        Curriculum().next(7)
    with pytest.raises(ValueError, match="level must be one of"):
        Curriculum(level=0)
