"""``manage.py restore <backup folder>``: load a backup into an empty database, then check the books."""

from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from console.backup import BackupError, restore_read


class Command(BaseCommand):
    help = "Load a backup (manage.py backup) into this empty database and prove the ledger balances."

    def add_arguments(self, parser):
        parser.add_argument("folder", help="a backup-<time>/ folder written by manage.py backup")

    def handle(self, *args, folder: str, **options):
        try:
            manifest = restore_read(folder=Path(folder))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        counts = manifest["counts"]
        self.stdout.write(
            f"restored the backup of {manifest['created_at']}: {counts['instances']} instances "
            f"({counts['instances_running']} running), {counts['volumes']} volumes, "
            f"{counts['ledger_transactions']} ledger transactions"
        )
        call_command("ledger_check", stdout=self.stdout, stderr=self.stderr)
        self.stdout.write("Start the console on this database: the reconciler adopts the machines still running.")
