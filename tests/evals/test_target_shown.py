"""A run's target as shown (evals.target_shown: keys masked, names shown) and what changed from
one target to another (evals.target_diff: a pure function of two targets and grader lists)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evals.runner.targets.base import DEFAULT_CONCURRENCY
from evals.target_diff import ABSENT, target_diff
from evals.target_shown import CREDENTIALS_MASKED, MASKED, base_url_shown, target_shown

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
TARGET = {
    "kind": "openai",
    "provider": "azure",
    "deployment": "gpt-4o-mini",
    "api_version": "2024-10-21",
    "base_url": "https://res.openai.azure.com",
    "model": "gpt-4o-mini",
    "api_key_env": "AZURE_OPENAI_API_KEY",
    "prompt_template": "Answer briefly: $input",
    "settings": {"temperature": 0.2, "max_tokens": 256},
}


def shown(target: dict) -> dict[str, str]:
    return {row.key: row.value for row in target_shown(target)}


def test_every_setting_of_a_model_target_is_shown_with_the_key_variable_by_name():
    rows = shown(TARGET)
    assert rows["provider"] == "azure"
    assert rows["deployment"] == "gpt-4o-mini"
    assert rows["api_version"] == "2024-10-21"
    assert rows["base_url"] == "https://res.openai.azure.com"
    assert rows["api_key_env"] == "AZURE_OPENAI_API_KEY"  # a NAME, not a secret
    assert rows["prompt_template"] == "Answer briefly: $input"
    assert rows["settings.temperature"] == "0.2"
    assert rows["settings.max_tokens"] == "256"  # "tokens" in a name is no secret
    assert rows["concurrency"] == f"{DEFAULT_CONCURRENCY} (default)"
    assert [r.key for r in target_shown(TARGET)][:3] == ["kind", "provider", "model"]


def test_a_keyless_endpoint_says_so():
    assert shown({**TARGET, "api_key_env": None})["api_key_env"].startswith("none")


def test_anything_that_looks_like_a_key_is_masked_wherever_it_sits():
    target = {
        **TARGET,
        "model": KEY,  # pasted into the wrong box
        "base_url": "https://user:hunter2@llm.example.com/v1?api-key=s3cret&x=1",
        "settings": {
            "extra_headers": {"Authorization": "Bearer abc", "X-Trace": "on"},
            "stop": [KEY, "END"],
            "api_key": "plain",
        },
        "custom_token": "abc",
    }
    rows = shown(target)
    text = " ".join(rows.values())
    for secret in (KEY, "hunter2", "s3cret", "Bearer abc", "plain"):
        assert secret not in text
    assert rows["model"] == MASKED
    assert rows["base_url"] == f"https://{CREDENTIALS_MASKED}@llm.example.com/v1?api-key=…&x=…"
    assert '"X-Trace": "on"' in rows["settings.extra_headers"]
    assert "END" in rows["settings.stop"]
    assert rows["custom_token"] == MASKED


def test_a_base_url_without_credentials_is_shown_as_written():
    assert base_url_shown("http://localhost:8080/v1") == "http://localhost:8080/v1"


def test_an_imported_or_empty_target_shows_what_it_holds():
    assert target_shown({}) == []
    rows = shown({"kind": "imported", "format": "jsonl", "file": "<b>x</b>.jsonl"})
    assert rows["file"] == "<b>x</b>.jsonl"  # plain text: the template escapes it


def test_the_diff_names_each_changed_setting_and_word_diffs_the_template():
    head = {
        **TARGET,
        "prompt_template": "Answer in detail: $input",
        "settings": {"temperature": 0.7, "max_tokens": 256, "top_p": 0.9},
    }
    diff = target_diff(TARGET, head)
    assert not diff.same
    [template] = diff.templates
    assert template.key == "prompt_template"
    assert ("delete", "briefly:") in template.diff.base
    assert ("insert", "in detail:") in template.diff.head
    changes = {s.key: (s.base, s.head) for s in diff.settings}
    assert changes == {"settings.temperature": ("0.2", "0.7"), "settings.top_p": (ABSENT, "0.9")}


def test_equal_targets_are_no_change_and_an_explicit_default_is_none_either():
    assert target_diff(TARGET, dict(TARGET)).same
    assert target_diff(TARGET, {**TARGET, "concurrency": DEFAULT_CONCURRENCY}).same
    assert not target_diff(TARGET, {**TARGET, "concurrency": 4}).same
    # The default provider named or not: the same endpoint.
    base = {k: v for k, v in TARGET.items() if k not in ("provider", "deployment", "api_version")}
    assert target_diff(base, {**base, "provider": "openai"}).same


def test_two_different_keys_differ_but_neither_is_shown():
    diff = target_diff({**TARGET, "model": KEY}, {**TARGET, "model": KEY[:-1] + "x"})
    [change] = diff.settings
    assert (change.base, change.head) == (MASKED, MASKED)


def test_grader_changes_are_added_removed_or_changed_by_key():
    a = [{"key": "exact", "kind": "exact"}, {"key": "len", "kind": "regex", "config": {"p": "."}}]
    b = [{"key": "exact", "kind": "exact", "gating": False}, {"key": "judge", "kind": "judge"}]
    diff = target_diff(TARGET, TARGET, base_graders=a, head_graders=b)
    assert diff.same and not diff.graders_same
    assert [(g.key, g.change) for g in diff.graders] == [
        ("exact", "changed"),
        ("judge", "added"),
        ("len", "removed"),
    ]
    assert target_diff(TARGET, TARGET, base_graders=a, head_graders=list(a)).graders_same


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["kind", "model", "settings", "x", "seed"]), JSON))
def test_a_target_never_differs_from_itself_and_always_from_a_changed_model(target):
    assert target_diff(target, target).same
    changed = {**target, "model": "m-one"}
    other = {**target, "model": "m-two"}
    assert not target_diff(changed, other).same
