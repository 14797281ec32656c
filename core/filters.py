"""The API's list filters (django-filter), refusing a typed parameter given empty.

django-filter skips a filter whose value is empty, so ``?date_to=`` or ``?status=`` answers the
unfiltered list: a client whose variable was empty reads rows it did not ask for, and the schema (a
date, one of an enum) is broken without a word. A text filter may be empty (the schema allows it).
"""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext as _


class FilterSet(django_filters.FilterSet):
    def is_valid(self) -> bool:
        valid = super().is_valid()
        for name, filter_ in self.filters.items():
            if isinstance(filter_, django_filters.CharFilter) or name not in self.data:
                continue
            values = self.data.getlist(name) if hasattr(self.data, "getlist") else [self.data[name]]
            if any(value.strip() == "" for value in values if isinstance(value, str)):
                self.form.add_error(name, _("Give a value, or leave the parameter out."))
                valid = False
        return valid
