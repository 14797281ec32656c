"""Load demo data for `make run`: the GPU catalogue and a staff account whose credentials it prints."""

from __future__ import annotations

import os

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from apps_marketplace.loaders import marketplace_catalogue_load
from instances.catalogue import catalogue_seed
from instances.services import nodes_ensure
from instances.skus import catalogue_skus_sync

DEMO_STAFF_EMAIL = "admin@example.com"


class Command(BaseCommand):
    help = "Create the demo GPU catalogue and a staff account (idempotent)."

    @transaction.atomic
    def handle(self, *args, **options) -> None:
        catalogue_seed()
        catalogue_skus_sync()
        nodes_ensure()
        marketplace_catalogue_load()
        User = get_user_model()
        password = os.environ.get("CONSOLE_DEMO_PASSWORD", "gpu-console-demo")
        staff, created = User.objects.get_or_create(
            email=DEMO_STAFF_EMAIL, defaults={"is_staff": True, "is_superuser": True, "display_name": "Admin"}
        )
        if created:
            staff.set_password(password)
            staff.save(update_fields=["password"])
        EmailAddress.objects.update_or_create(
            user=staff, email=staff.email, defaults={"verified": True, "primary": True}
        )
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
        if created:
            self.stdout.write(f"Staff account: {DEMO_STAFF_EMAIL} / {password}")
        else:
            self.stdout.write(f"Staff account: {DEMO_STAFF_EMAIL} (password unchanged since it was created)")
