"""``manage.py usage_check``: every running second of instances billed exactly once (instances/usage_audit.py)."""

from __future__ import annotations

import json
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from instances.models import Instance
from instances.usage_audit import usage_audit


class Command(BaseCommand):
    help = "Check instances' GPU meters against their timelines and the ledger; exit 1 on any difference."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, default=7, help="instances created in the last N days (default 7)")
        parser.add_argument("--owner-email-startswith", default="", help="only the instances of these owners")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON line")

    def handle(self, *args, days: int, owner_email_startswith: str, as_json: bool, **options) -> None:
        instances = Instance.objects.filter(created_at__gte=timezone.now() - timedelta(days=days))
        if owner_email_startswith:
            instances = instances.filter(owner__email__startswith=owner_email_startswith)
        audit = usage_audit(instances=instances)
        if as_json:
            self.stdout.write(json.dumps(audit.as_dict()))
        else:
            self.stdout.write(
                f"{audit.instances} instances, {audit.stretches} running stretches: "
                f"{audit.running_s} s run, {audit.billed_s} s billed"
            )
        for problem in audit.problems:
            self.stderr.write(problem)
        if not audit.ok:
            raise CommandError(f"{len(audit.problems)} differences between the timelines and the bills")
