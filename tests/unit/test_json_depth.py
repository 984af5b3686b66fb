from __future__ import annotations

import json
import random

import pytest

from queenadmin.api.http import json_depth_over, json_text_depth_over

STRINGS = ["", "a", "[", "]", "{", "}", "[[{", "}]]", '"', '\\"', "\\", "\\\\", "é[", "x\\n]"]


def value(rng: random.Random, depth: int):
    kind = rng.choice(["list", "dict", "str", "num", "null"] if depth < 12 else ["str", "num", "null"])
    if kind == "list":
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        return {rng.choice(STRINGS) + str(n): value(rng, depth + 1) for n in range(rng.randint(0, 3))}
    if kind == "str":
        return rng.choice(STRINGS)
    return 1.5 if kind == "num" else None


@pytest.mark.parametrize("seed", range(300))
def test_reading_the_bytes_agrees_with_walking_the_value(seed):
    """Where the bytes can tell, they tell what the walk of the parsed value does."""
    rng = random.Random(seed)
    parsed = value(rng, 0)
    body = json.dumps(parsed, ensure_ascii=rng.random() < 0.5, separators=rng.choice([(",", ":"), (", ", ": ")]))
    for limit in range(15):
        over = json_text_depth_over(body.encode(), limit)
        if over is None:
            assert b'\\"' in body.encode()
        else:
            assert over == json_depth_over(parsed, limit), (body, limit)


def test_brackets_inside_strings_do_not_count():
    """A string that spells brackets, opening or closing, is no nesting."""
    body = '["]", [[[1]]], "[", {"}{": "[[[["}]'
    assert json_text_depth_over(body.encode(), 4) is False
    assert json_text_depth_over(body.encode(), 3) is True
    assert json_depth_over(json.loads(body), 3) is True


def test_an_escaped_quote_leaves_the_answer_to_the_walk():
    assert json_text_depth_over(b'["a\\"]"]', 5) is None


def test_mixed_brackets_count_each_level_once():
    assert json_text_depth_over(b'{"a":[{"b":[]}]}', 4) is False
    assert json_text_depth_over(b'{"a":[{"b":[]}]}', 3) is True
