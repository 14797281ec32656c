"""Filtering and ordering of the instance list (``GET /api/v1/instances/``), with django-filter.

A filter value that names nothing valid (an unknown status, a region slug with a NUL) is a 400 naming
the parameter, never an empty list that looks like "you have none".
"""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext_lazy as _

from core.filters import FilterSet
from instances.models import Instance


class InstanceFilter(FilterSet):
    status = django_filters.MultipleChoiceFilter(
        choices=Instance.Status.choices, help_text=_("Only these statuses (repeat the parameter for several).")
    )
    region = django_filters.CharFilter(field_name="region__slug", help_text=_("Region slug, e.g. cn-north-1."))
    gpu_model = django_filters.CharFilter(field_name="gpu_model__slug", help_text=_("GPU model slug, e.g. a800-80g."))
    released = django_filters.BooleanFilter(
        method="_released", help_text=_("Include released instances (left out by default).")
    )
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "created_at"), ("name", "name"), ("status", "status"), ("hourly_price_fen", "price")),
        help_text=_("Sort key; a leading minus sorts descending. Newest first by default."),
    )

    class Meta:
        model = Instance
        fields: list[str] = []

    def _released(self, queryset, name, value):
        # Applied by the view, which asks the selector for released ones too (see InstanceViewSet).
        return queryset
