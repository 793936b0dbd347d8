"""Typed language-server options: defaults, aliases from both clients' setting shapes, invalid values reported."""

from __future__ import annotations

from backstory.lsp.options import Options, parse_options


def test_defaults_when_nothing_is_sent() -> None:
    options, problems = parse_options(None)
    assert options == Options()
    assert problems == []
    assert options.hoverPrewarm is True


def test_vscode_nested_and_neovim_snake_case_map_to_the_same_fields() -> None:
    nested, p1 = parse_options({"backstory": {"results": {"count": 7}, "hover": {"enabled": False, "prewarm": False}}})
    snake, p2 = parse_options({"result_count": 7, "hover": False, "hover_prewarm": False})
    assert p1 == p2 == []
    assert nested == snake
    assert (nested.k, nested.hover, nested.hoverPrewarm) == (7, False, False)


def test_invalid_values_are_reported_and_defaulted_while_valid_ones_apply() -> None:
    options, problems = parse_options({"k": 0, "hoverPrewarm": "yes", "recencyWeight": 2, "hoverMax": 5})
    assert (options.k, options.hoverPrewarm, options.recencyWeight, options.hoverMax) == (10, True, 0.05, 5)
    assert len(problems) == 3
    assert any("hoverPrewarm='yes'" in p and "expected bool" in p for p in problems)


def test_unknown_keys_belong_to_the_client_and_a_non_object_is_one_problem() -> None:
    options, problems = parse_options({"trace": {"server": "verbose"}, "k": 3})
    assert options.k == 3 and problems == []
    options, problems = parse_options(["not", "an", "object"])
    assert options == Options() and len(problems) == 1


def test_the_second_stage_setting_reaches_every_search() -> None:
    """The server's searches (commands, code actions) order reranked candidates as the setting says."""
    from types import SimpleNamespace

    from backstory.lsp.commands import _options

    options, problems = parse_options({"second_stage": "blend"})
    assert problems == [] and options.secondStage == "blend"
    assert _options(SimpleNamespace(options=options), {}).second_stage == "blend"  # type: ignore[arg-type]
    assert _options(SimpleNamespace(options=Options()), {}).second_stage == "learned"  # type: ignore[arg-type]
    options, problems = parse_options({"secondStage": "cross-encoder"})
    assert options.secondStage == "learned" and len(problems) == 1 and "secondStage" in problems[0]
