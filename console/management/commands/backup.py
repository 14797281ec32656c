"""``manage.py backup [--into DIR]``: a consistent dump of the database and its manifest (console.backup)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.backup import BackupError, backup_write


class Command(BaseCommand):
    help = "Dump the database (one consistent snapshot, while the console runs) and write its manifest."

    def add_arguments(self, parser):
        parser.add_argument("--into", default="var/backups", help="the folder that receives backup-<time>/")

    def handle(self, *args, into: str, **options):
        try:
            folder = backup_write(into=Path(into))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"backup written: {folder}"))
        self.stdout.write("Back up beside it what the manifest lists: volumes' data and the registry's images.")
