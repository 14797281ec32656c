"""The REST API's serializers for billing: what its endpoints take and give."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from billing.gateways import gateways_enabled
from billing.models import TopUpOrder, Transaction
from billing.payments import InvalidAmount, topup_amount_check, yuan_to_fen


class BalanceSerializer(serializers.Serializer):
    currency = serializers.CharField()
    cash_fen = serializers.IntegerField(help_text=_("Paid balance from top-ups."))
    trial_fen = serializers.IntegerField(help_text=_("Trial credit, spent before paid money."))
    total_fen = serializers.IntegerField()
    owed_fen = serializers.IntegerField(help_text=_("Used but not yet charged; settled at the next tick."))
    burn_fen_per_hour = serializers.IntegerField(help_text=_("What everything running costs per hour."))
    runway_seconds = serializers.IntegerField(
        allow_null=True, help_text=_("How long the balance lasts at the current rate; null when nothing runs.")
    )


class TransactionSerializer(serializers.ModelSerializer):
    amount_fen = serializers.IntegerField(help_text=_("Change of your total balance (negative: money out)."))
    cash_fen = serializers.IntegerField(help_text=_("Change of your paid balance."))
    trial_fen = serializers.IntegerField(help_text=_("Change of your trial credit."))

    class Meta:
        model = Transaction
        fields = ["id", "kind", "description", "created_at", "amount_fen", "cash_fen", "trial_fen", "metadata"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        for key in ("amount_fen", "cash_fen", "trial_fen"):
            data[key] = data[key] or 0
        return data


class TopUpOrderSerializer(serializers.ModelSerializer):
    class Meta:
        model = TopUpOrder
        fields = [
            "id",
            "amount_fen",
            "currency",
            "status",
            "gateway",
            "gateway_reference",
            "checkout_qr",
            "refunded_fen",
            "created_at",
            "paid_at",
        ]


class TopUpOrderCreatedSerializer(TopUpOrderSerializer):
    checkout_url = serializers.SerializerMethodField(help_text=_("Send the payer here to pay."))

    class Meta(TopUpOrderSerializer.Meta):
        fields = [*TopUpOrderSerializer.Meta.fields, "checkout_url"]

    def get_checkout_url(self, order) -> str:
        return self.context["checkout_url"]


class TopUpCreateSerializer(serializers.Serializer):
    amount = serializers.CharField(
        required=False, max_length=20, help_text=_('The amount in yuan as text, e.g. "50" or "99.90".')
    )
    amount_fen = serializers.IntegerField(required=False, help_text=_("Or the amount in fen, e.g. 5000."))
    gateway = serializers.ChoiceField(
        choices=(),
        required=False,
        help_text=_("The payment method: one of the enabled gateways' names (the default one when omitted)."),
        error_messages={"invalid_choice": _("Choose one of the payment methods offered.")},
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The gateways this deployment enables, so the schema lists them as the field's values.
        self.fields["gateway"].choices = [gateway.name for gateway in gateways_enabled()]

    def validate(self, attrs):
        if ("amount" in attrs) == ("amount_fen" in attrs):
            raise ValidationError({"amount": [_("Give either amount (yuan) or amount_fen.")]})
        try:
            fen = yuan_to_fen(attrs["amount"]) if "amount" in attrs else attrs["amount_fen"]
            topup_amount_check(amount_fen=fen)
        except InvalidAmount as exc:
            field = "amount" if "amount" in attrs else "amount_fen"
            raise ValidationError({field: [str(exc)]}) from None
        return {"amount_fen": fen, "gateway": attrs.get("gateway")}


class MonthSummarySerializer(serializers.Serializer):
    month = serializers.CharField(source="key", help_text=_("YYYY-MM, in the console's time zone."))
    opening_fen = serializers.IntegerField()
    topups_fen = serializers.IntegerField()
    refunds_fen = serializers.IntegerField()
    adjustments_fen = serializers.IntegerField()
    trial_fen = serializers.IntegerField()
    usage_fen = serializers.IntegerField()
    transfers_fen = serializers.IntegerField(help_text=_("Paid money moved in from (negative: out to) another wallet."))
    closing_fen = serializers.IntegerField()


class UsageLineSerializer(serializers.Serializer):
    meter = serializers.IntegerField(source="meter_id", allow_null=True)
    resource = serializers.CharField(source="ref")
    description = serializers.CharField()
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    seconds = serializers.IntegerField()
    quantity = serializers.IntegerField()
    unit = serializers.CharField()
    price_fen = serializers.IntegerField(help_text=_("Price per unit per unit of quantity."))
    amount_fen = serializers.IntegerField()
    resource_key = serializers.CharField(help_text=_("The resource measured, e.g. instance:<id>."))
    resource_label = serializers.CharField()
    member_id = serializers.IntegerField(allow_null=True, help_text=_("Who launched it (a team's statement)."))
    member_label = serializers.CharField()


class BreakdownSerializer(serializers.Serializer):
    key = serializers.CharField(allow_null=True)
    label = serializers.CharField()
    lines = serializers.IntegerField()
    seconds = serializers.IntegerField()
    amount_fen = serializers.IntegerField()


class StatementSerializer(serializers.Serializer):
    summary = MonthSummarySerializer()
    lines = UsageLineSerializer(many=True)
    lines_total_fen = serializers.IntegerField()
    by_member = BreakdownSerializer(many=True, help_text=_("Usage per person who launched it."))
    by_resource = BreakdownSerializer(many=True, help_text=_("Usage per instance (its meters together)."))
