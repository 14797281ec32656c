"""Refund (part of) a paid top-up: ``manage.py topup_refund 42 50.00 --reason "Duplicate payment"``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from billing.gateways import GatewayError
from billing.models import TopUpOrder
from billing.payments import InvalidAmount, RefundRefused, topup_refund, yuan_to_fen


class Command(BaseCommand):
    help = "Send paid money of a top-up back to the payer through the gateway (never trial credit)."

    def add_arguments(self, parser):
        parser.add_argument("order", type=int, help="The top-up order's id.")
        parser.add_argument("amount", help="The amount in yuan, e.g. 50 or 12.34.")
        parser.add_argument("--reason", required=True, help="Why the money goes back (kept with the refund).")
        parser.add_argument("--key", help="An idempotency key for a second refund of the same amount and reason.")

    def handle(self, *args, order: int, amount: str, reason: str, key: str | None, **options):
        try:
            order_obj = TopUpOrder.objects.get(pk=order)
        except TopUpOrder.DoesNotExist:
            raise CommandError(f"No top-up order {order}.") from None
        try:
            refund = topup_refund(order=order_obj, amount_fen=yuan_to_fen(amount), reason=reason, key=key)
        except (InvalidAmount, RefundRefused, GatewayError) as exc:
            raise CommandError(str(exc)) from exc
        order_obj.refresh_from_db()
        self.stdout.write(
            f"Refund {refund.pk}: ¥{refund.amount_fen / 100:.2f} of order {order} "
            f"(gateway refund {refund.gateway_refund_id}); the order is now {order_obj.status}."
        )
