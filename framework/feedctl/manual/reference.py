"""The manual's reference pages, generated from what the code holds, so that they cannot drift from it: the
commands and their flags (the click commands), the files' keys and options (the JSON Schemas, the options'
defaults), the sink schemes (the sink registry), the diagnostic codes (`diagnostics.CODES`, with examples
that trigger them), the metrics (the metrics modules), the manifest's and `jobs --json`'s fields.

`pages()` gives each page's path under `docs/` and its Markdown; `docs/hooks/reference.py` adds them to the
site as it builds."""

from __future__ import annotations

import inspect

import click

from feedctl.manual import cockroachdb
from feedctl.manual.code_examples_page import diagnostics_page
from feedctl.manual.schema_pages import Key, Schemas, cell, default_text, key_section, prose, schema, user_schema

GENERATED = "This page is generated from the code at each build of the manual."


def pages() -> dict[str, str]:
    return {
        "reference/commands.md": commands_page(),
        "reference/project.md": project_page(),
        "reference/feed-options.md": feed_options_page(),
        "reference/sinks.md": sinks_page(),
        "reference/diagnostics.md": diagnostics_page(),
        "reference/metrics.md": metrics_page(),
        "reference/manifest.md": manifest_page(),
        "reference/jobs-json.md": jobs_json_page(),
    }


# commands


def command_anchor(words: tuple[str, ...]) -> str:
    return "-".join(("feedctl", *words))


def commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command, as the words that name it, groups' commands under their group."""
    from feedctl.cli import main

    out: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(group: click.Group, words: tuple[str, ...]) -> None:
        with click.Context(group) as ctx:
            for name in group.list_commands(ctx):
                command = group.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                if isinstance(command, click.Group):
                    walk(command, (*words, name))
                else:
                    out.append(((*words, name), command))

    walk(main, ())
    return out


def _flag(param: click.Option) -> str:
    names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
    if not param.is_flag and not param.count:
        kind = "VALUE" if isinstance(param.type, click.Choice) else param.type.name.split()[0].upper()
        names += f" `{param.metavar or kind}`"
    return names


def _param_default(param: click.Option) -> str:
    default = param.to_info_dict()["default"]
    if default in (None, False, (), [], "") or param.is_flag:
        return ""
    return f"`{default}`"


def _params_table(params: list[click.Parameter]) -> list[str]:
    options = [p for p in params if isinstance(p, click.Option) and not p.hidden]
    if not options:
        return []
    rows = ["| flag | default | what it does |", "|---|---|---|"]
    for param in options:
        text = param.help or ""
        if isinstance(param.type, click.Choice):
            text += " One of " + ", ".join(f"`{c}`" for c in param.type.choices) + "."
        if param.multiple and "repeatable" not in text.lower():
            text += " Repeatable."
        if param.envvar:
            text += f" Also from `{param.envvar}`."
        rows.append(f"| {_flag(param)} | {_param_default(param)} | {cell(text)} |")
    return [*rows, ""]


def commands_page() -> str:
    from feedctl.cli import main

    lines = [
        "# Commands",
        "",
        GENERATED + " Exit codes: 0 success; 1 the project or a job has errors; 2 bad command-line usage.",
        "",
        "## Global flags {#global-flags}",
        "",
        "Given before the command, as in `feedctl --log-format json ls`.",
        "",
        *_params_table([p for p in main.params if p.name != "version"]),
    ]
    for words, command in commands():
        arguments = [p.human_readable_name for p in command.params if isinstance(p, click.Argument)]
        usage = " ".join(("feedctl", *words, *arguments))
        lines += [f"## feedctl {' '.join(words)} {{#{command_anchor(words)}}}", "", f"`{usage}`", ""]
        lines += [prose(inspect.cleandoc(command.help or "").replace("\b\n", "")), ""]
        lines += _params_table(command.params)
    return "\n".join(lines)


# the files users write


def _schema_page(title: str, intro: str, keys, defaults: dict | None = None, notes: dict | None = None) -> str:
    lines = [f"# {title}", "", intro, "", GENERATED, ""]
    for key in keys:
        default = None
        if defaults is not None and key.name in defaults:
            default = default_text(defaults[key.name])
        extra = (f"**CockroachDB**: {notes[key.name]}",) if notes and key.name in notes else ()
        lines.append(key_section(key, default, extra))
    return "\n".join(lines)


def project_page() -> str:
    project = user_schema("project")
    return _schema_page(
        "project.yml",
        "Every key of a project's `project.yml`. A key path such as `sources[].tables[].path` is a key of each "
        "item of a list. Connection settings may take `{{ env_var('NAME') }}`; "
        "see [Projects, secrets and templates](../guides/projects.md).",
        Schemas(project).keys(project),
    )


def feed_keys() -> list[Key]:
    feeds = user_schema("feeds")
    return [k for k in Schemas(feeds).keys(feeds["$defs"]["feed"]) if not k.path.startswith("options")]


def feed_options() -> list[Key]:
    feeds = user_schema("feeds")
    return list(Schemas(feeds).keys(feeds["$defs"]["options"]))


def feed_options_page() -> str:
    from feedctl.options import DEFAULTS, IN_PLACE_OPTIONS, NEW_JOB_REASONS

    lines = [
        "# Feeds and their options",
        "",
        "A feed file (`feeds/*.yml`) holds a list `feeds:`, each a feed with the keys below, and its `options:`, "
        "named and valued as CockroachDB's `CREATE CHANGEFEED ... WITH` options. Each option says how it relates "
        "to CockroachDB's, and what changing it does to a running job (see "
        "[Changing running feeds](../guides/changing-feeds.md)).",
        "",
        GENERATED,
        "",
        "## A feed's keys",
        "",
    ]
    lines += [key_section(k, anchor=f"feed-{k.anchor}") for k in feed_keys()]
    lines += ["## Options", ""]
    for key in feed_options():
        if key.name in IN_PLACE_OPTIONS:
            change = "a running job takes the new value from its next batch on."
        else:
            change = f"a new job ({NEW_JOB_REASONS.get(key.name, 'the job would emit something else')})."
        extra = (f"**CockroachDB**: {cockroachdb.FEED_OPTIONS[key.name]}", f"**When changed**: {change}")
        lines.append(key_section(_option(key), default_text(DEFAULTS.get(key.name)), extra))
    return "\n".join(lines)


def _option(key: Key) -> Key:
    """An option's section is named by the option alone (`#resolved`), not its path under `options`."""
    return Key(key.name, key.node, key.kind, key.required)


def sink_options() -> list[Key]:
    sinks = user_schema("sinks")
    return [k for k in Schemas(sinks).keys(sinks["$defs"]["options"]) if "." not in k.path]


def sinks_page() -> str:
    from feedctl.options import SINK_DEFAULTS
    from feedctl.sinks.registry import SCHEMES, SINKS, option_kinds

    sinks = user_schema("sinks")
    lines = [
        "# Sinks and their options",
        "",
        "A sink file (`sinks/*.yml`) holds a list `sinks:`, each a sink with a name, a URI whose scheme names "
        "its kind, and options. The guides show each kind at work: "
        "[cloud storage](../guides/sinks/cloud-storage.md), [Kafka](../guides/sinks/kafka.md), "
        "[webhooks](../guides/sinks/webhook.md).",
        "",
        GENERATED,
        "",
        "## Schemes",
        "",
        "| scheme | kind | formats | options that apply |",
        "|---|---|---|---|",
    ]
    kinds = option_kinds()
    for scheme, (kind, _module) in sorted(SCHEMES.items()):
        sink_kind = SINKS[kind].KIND
        applying = sorted(o for o, of in kinds.items() if kind in of)
        formats = ", ".join(f"`{f}`" for f in sorted(sink_kind.formats))
        options = ", ".join(f"[`{o}`](#option-{o})" for o in applying) or "none"
        lines.append(f'| <span id="{scheme}"></span>`{scheme}://` | {kind} | {formats} | {options} |')
    lines += ["", "## A sink's keys", ""]
    sink_keys = Schemas(sinks).keys(sinks["$defs"]["sink"])
    lines += [key_section(k, anchor=f"sink-{k.anchor}") for k in sink_keys if not k.path.startswith("options")]
    lines += ["## Options", ""]
    for key in sink_options():
        applies = ", ".join(sorted(kinds.get(key.name, ()))) or "none"
        extra = (f"**Sinks**: {applies}.", f"**CockroachDB**: {cockroachdb.SINK_OPTIONS[key.name]}")
        default = default_text(SINK_DEFAULTS.get(key.name))
        lines.append(key_section(_option(key), default, extra, anchor=f"option-{key.name}"))
    return "\n".join(lines)


# what feedctl writes and serves


def metrics() -> list[tuple[str, str, str]]:
    """(name as scraped, type, help) of every metric a `--follow` node serves."""
    from feedctl.metrics.changefeed import REGISTRY
    from feedctl.metrics.node_gauges import NodeGauges

    out = []
    for family in REGISTRY.collect():
        suffix = "_total" if family.type == "counter" else ""
        out.append((family.name + suffix, family.type, family.documentation))
    for family in NodeGauges.describe(NodeGauges(None, "", list)):  # describe() reads nothing
        suffix = "_total" if family.type == "counter" else ""
        out.append((family.name + suffix, family.type, family.documentation))
    return sorted(out)


def metrics_page() -> str:
    lines = [
        "# Metrics",
        "",
        "What `feedctl run --follow --metrics-port P` serves at `/metrics` in Prometheus' text format. Names "
        "follow CockroachDB's (`changefeed.emitted_messages` is `changefeed_emitted_messages` here); each is "
        "labeled with the feed's `metrics_label` as `scope` (`default` for feeds without one) and the node. "
        "See [Watching feeds](../guides/watching.md). Each counter and histogram also has a `_created` series, "
        "the time the node's process created it, as Prometheus' client library adds to every one.",
        "",
        GENERATED,
        "",
    ]
    for name, kind, text in metrics():
        lines += [f"## `{name}` {{#{name}}}", "", f"*{kind}*. {text}", ""]
    return "\n".join(lines)


def manifest_page() -> str:
    manifest = schema("feedctl.compiler", "manifest.schema.json")
    keys = Schemas(manifest, defs=manifest).keys(manifest)
    return _schema_page(
        "target/manifest.json",
        "What `feedctl compile` writes to `target/manifest.json` (secrets shown as `****`): " + manifest["description"],
        keys,
    )


def jobs_json_page() -> str:
    from feedctl.commands.jobs import JOB_FIELDS

    lines = [
        "# feedctl jobs --json",
        "",
        "`feedctl jobs --json` prints one JSON object per job and line (JSON lines), with these fields. "
        "See [Watching feeds](../guides/watching.md).",
        "",
        GENERATED,
        "",
        "| field | what it holds |",
        "|---|---|",
    ]
    lines += [f'| <span id="{name}"></span>`{name}` | {cell(text)} |' for name, text in JOB_FIELDS.items()]
    return "\n".join(lines) + "\n"
