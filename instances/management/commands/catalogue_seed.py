"""Create or update the GPU catalogue and the backends' regions, and read every backend's nodes.

For deployments: ``migrate`` then ``catalogue_seed`` on every release (idempotent). Unlike
``seed_demo`` it creates no account; make the first staff account with ``createsuperuser``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from instances.catalogue import catalogue_seed
from instances.models import Region
from instances.services import nodes_ensure
from instances.skus import catalogue_skus_sync


class Command(BaseCommand):
    help = "Create or update the GPU catalogue, a region for each backend that declares one, and read their nodes."

    def handle(self, *args, **options) -> None:
        with transaction.atomic():
            catalogue_seed()
            catalogue_skus_sync()
        nodes_ensure()  # outside the transaction: a backend that does not answer is retried by the reconciler
        for region in Region.objects.order_by("slug"):
            self.stdout.write(f"{region.slug}: {region.name} (backend {region.backend_alias})")
        self.stdout.write(self.style.SUCCESS("Catalogue ready."))
