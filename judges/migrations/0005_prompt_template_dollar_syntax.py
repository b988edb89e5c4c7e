"""Judge prompt templates move from ``{name}`` (``str.format`` syntax) to ``$name``
(``string.Template``, the syntax targets use).

Every stored version has a template in the old syntax (an empty template always stored the
kind's default), and grading now refuses ``{input}`` rather than send it literally, so
without this every existing version, trusted ones included, would stop grading. Each
template is rewritten to the ``$name`` template that renders exactly the same text for
every input (``{input}`` -> ``$input``, ``{{`` -> ``{``, a literal ``$`` -> ``$$``), so the
version's behaviour, its calibration and its approval stay valid; the old defaults become
exactly the new defaults. ``content_hash`` is recomputed over the new text (the rewrite is
one-to-one, so two versions of a judge never collide). A template that does not parse in
the old syntax is left as it is: grading refuses it with an errored grade naming the syntax.

The helpers are copies, frozen here, of ``judges.models.judge_version_hash`` at the time.
"""

import hashlib
import json
import string

from django.db import migrations


def _hash(version) -> str:
    extra = {"base_url": version.base_url} if version.base_url else {}
    payload = json.dumps(
        {
            **extra,
            "model": version.model,
            "protocol": version.protocol,
            "prompt_template": version.prompt_template,
            "params": version.params,
            "output_schema": version.output_schema,
            "threshold": version.threshold,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _is_name_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def dollar_from_braces(template: str) -> str | None:
    """The ``$name`` template rendering what the ``{name}`` ``template`` rendered; None when
    ``template`` does not parse or has a placeholder that is not a bare name."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return None
    parts = []
    for index, (literal, name, spec, conversion) in enumerate(parsed):
        parts.append(literal.replace("$", "$$"))
        if name is None:
            continue
        if not (name.isascii() and name.isidentifier()) or spec or conversion:
            return None
        following = parsed[index + 1][0][:1] if index + 1 < len(parsed) else ""
        parts.append(f"${{{name}}}" if _is_name_char(following) else f"${name}")
    return "".join(parts)


def braces_from_dollar(template: str) -> str | None:
    """The inverse of ``dollar_from_braces``; None when ``template`` has a malformed ``$``."""
    parts, start = [], 0
    for match in string.Template.pattern.finditer(template):
        parts.append(template[start : match.start()].replace("{", "{{").replace("}", "}}"))
        start = match.end()
        if match.group("invalid") is not None:
            return None
        name = match.group("named") or match.group("braced")
        parts.append("$" if name is None else f"{{{name}}}")
    parts.append(template[start:].replace("{", "{{").replace("}", "}}"))
    return "".join(parts)


def _rewrite(apps, convert) -> None:
    JudgeVersion = apps.get_model("judges", "JudgeVersion")
    for version in JudgeVersion.objects.exclude(prompt_template="").iterator():
        template = convert(version.prompt_template)
        if template is None or template == version.prompt_template:
            continue
        version.prompt_template = template
        version.content_hash = _hash(version)
        version.save(update_fields=["prompt_template", "content_hash"])


def forwards(apps, schema_editor):
    _rewrite(apps, dollar_from_braces)


def backwards(apps, schema_editor):
    _rewrite(apps, braces_from_dollar)


class Migration(migrations.Migration):
    dependencies = [("judges", "0004_judgeapproval_trust_stored_once")]

    operations = [migrations.RunPython(forwards, backwards)]
