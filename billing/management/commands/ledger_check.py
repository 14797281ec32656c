"""``manage.py ledger_check``: prove the books balance; exit code 1 and a report on any mismatch."""

from django.core.management.base import BaseCommand

from billing.services import ledger_check, ledger_check_record


class Command(BaseCommand):
    help = "Prove every cached balance equals its entries and every transaction sums to zero."

    def add_arguments(self, parser):
        parser.add_argument("--record", action="store_true", help="keep the result for the staff page")

    def handle(self, *args, record: bool = False, **options):
        result = ledger_check_record() if record else ledger_check()
        self.stdout.write(
            f"accounts: {result.accounts_checked}  transactions: {result.transactions_checked}  "
            f"sum of all entries: {result.entries_total} fen"
        )
        if result.ok:
            self.stdout.write(self.style.SUCCESS("ledger OK: every balance equals its entries; everything sums to 0"))
            return
        self.stderr.write(self.style.ERROR(f"ledger MISMATCH: {len(result.problems)} problem(s)"))
        for problem in result.problems:
            self.stderr.write(f"  - {problem}")
        raise SystemExit(1)
