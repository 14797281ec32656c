"""``manage.py hooks``: who calls whom at run time (``core.hooks``), as ARCHITECTURE.md shows it."""

from django.core.management.base import BaseCommand

from core.hooks import hooks_markdown


class Command(BaseCommand):
    help = (
        "List every hook (where a lower app asks a higher one): where it is declared, how many may answer, "
        "what for, and what implements it in this configuration. A Markdown table, as ARCHITECTURE.md has it."
    )

    def handle(self, *args, **options):
        self.stdout.write(hooks_markdown(), ending="")
