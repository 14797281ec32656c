"""Filtering and ordering of the transaction list (``GET /api/v1/billing/transactions/``).

Dates are days in the console's time zone, both ends included, as a statement reads them. A bad
date or an unknown kind is a 400 naming the parameter.
"""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext_lazy as _

from billing.models import Transaction
from core.filters import FilterSet


class TransactionFilter(FilterSet):
    kind = django_filters.MultipleChoiceFilter(
        choices=Transaction.Kind.choices, help_text=_("Only these kinds (repeat the parameter for several).")
    )
    date_from = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__gte", help_text=_("From this day (YYYY-MM-DD), included.")
    )
    date_to = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__lte", help_text=_("Up to this day (YYYY-MM-DD), included.")
    )
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "created_at"), ("amount_fen", "amount_fen")),
        help_text=_("Sort key; a leading minus sorts descending. Newest first by default."),
    )

    class Meta:
        model = Transaction
        fields: list[str] = []
