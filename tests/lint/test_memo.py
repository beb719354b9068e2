"""The linter's one memo: answers kept, cycles cut, depth bounded."""

from __future__ import annotations

from ferry.lint.memo import Memo


def test_each_answer_is_computed_once() -> None:
    calls: list[int] = []

    def square(n: int) -> int:
        calls.append(n)
        return n * n

    memo: Memo[int, int] = Memo(square, -1)
    assert memo(3) == 9
    assert memo(3) == 9
    assert calls == [3]
    assert 3 in memo
    assert 4 not in memo


def test_a_question_asked_again_while_answered_gets_the_cycle_answer() -> None:
    bound = {"x": "y", "y": "x", "z": "1"}  # x = y; y = x; z = 1

    def value(name: str) -> str | None:
        target = bound[name]
        return target if target.isdigit() else memo(target)

    memo: Memo[str, str | None] = Memo(value, None)
    assert memo("x") is None
    assert memo("z") == "1"


def test_past_the_depth_limit_the_answer_is_unknown_and_not_kept() -> None:
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + memo(n - 1)

    memo: Memo[int, int] = Memo(depth, -1000, max_depth=5)
    assert memo(10) < 0  # the chain was cut five questions deep
    assert 5 not in memo or memo(5) != -1000
    assert memo(3) == 3
