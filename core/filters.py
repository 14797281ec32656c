"""The API's list filters (django-filter), refusing a typed parameter given empty.

django-filter skips a filter whose value is empty, so ``?date_to=`` or ``?status=`` answers the
unfiltered list: a client whose variable was empty reads rows it did not ask for, and the schema (a
date, one of an enum) is broken without a word. A text filter may be empty (the schema allows it), and so may the ordering (the default order).
A boolean is ``true`` or ``false`` (or ``1`` and ``0``), as the schema's boolean: django-filter would
read ``?released=maybe`` as no filter at all.
"""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext as _

_BOOLEANS = {"true", "false", "1", "0"}


class FilterSet(django_filters.FilterSet):
    def is_valid(self) -> bool:
        valid = super().is_valid()
        for name, filter_ in self.filters.items():
            if isinstance(filter_, django_filters.CharFilter | django_filters.OrderingFilter) or name not in self.data:
                continue
            values = self.data.getlist(name) if hasattr(self.data, "getlist") else [self.data[name]]
            values = [value for value in values if isinstance(value, str)]
            if any(value.strip() == "" for value in values):
                self.form.add_error(name, _("Give a value, or leave the parameter out."))
                valid = False
            elif isinstance(filter_, django_filters.BooleanFilter) and any(
                value.lower() not in _BOOLEANS for value in values
            ):
                self.form.add_error(name, _("Give true or false."))
                valid = False
        return valid
