"""`python manage.py registry_list [--kind KIND] [--json]`: the functions configs may name in
this install (``core.registry``): each name, its kinds and the registry that exposed it."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from core.commands import DomainCommand
from core.registry import KINDS, SETTING, registry_active


class Command(DomainCommand):
    help = "List the registered functions a config may name, and the registries loaded."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", choices=KINDS, help="only the functions of this kind")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        registry = registry_active()
        entries = sorted(registry.entries.values(), key=lambda e: e.name)
        if opts["kind"]:
            entries = [e for e in entries if opts["kind"] in e.kinds]
        if opts["json"]:
            rows = [{"name": e.name, "kinds": sorted(e.kinds), "source": e.source} for e in entries]
            self.stdout.write(json.dumps({"registries": registry.sources, "functions": rows}))
            return
        if not registry.sources:
            self.stdout.write(f"no registry is loaded ({SETTING} is empty): no configured code")
            return
        self.stdout.write(f"registries: {', '.join(registry.sources)}")
        for entry in entries:
            self.stdout.write(f"{entry.name}  {', '.join(sorted(entry.kinds))}  ({entry.source})")
