"""Tables that are history: rows are added, never edited or deleted (the ledger, the security log).

An abstract model and its queryset refuse ``save()`` of an existing row, ``update()`` and ``delete()``
at the ORM, so a stray admin action or a careless service fails loudly instead of rewriting history.
Corrections are new rows. (A foreign key's ``CASCADE`` deletes through Django's collector, which uses
the base manager: that is the one way out, and each model chooses it by its ``on_delete``.)
"""

from __future__ import annotations

from django.db import models


class AppendOnlyError(Exception):
    """An attempt to edit or delete a row of an append-only table."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError(f"{self.model.__name__} rows cannot be updated.")

    def delete(self):
        raise AppendOnlyError(f"{self.model.__name__} rows cannot be deleted.")

    def _raw_delete(self, using):
        raise AppendOnlyError(f"{self.model.__name__} rows cannot be deleted.")


class AppendOnlyModel(models.Model):
    """A row is written once; ``save()`` of an existing row and ``delete()`` raise ``AppendOnlyError``."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows cannot be updated.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"{type(self).__name__} rows cannot be deleted.")
