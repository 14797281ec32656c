"""``manage.py images_publish [name …]``: push the built catalogue images to the console's registry and
record their digests (``instances.publish``)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from instances.publish import build_record, image_publish
from instances.registry import Registry, RegistryError


class Command(BaseCommand):
    help = "Push built images (var/images/<name>.json) to CONSOLE_REGISTRY and record their digests and sizes."

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="images to publish (default: every one built)")
        parser.add_argument(
            "--records", default="", help="the folder of build records (default: var/images, as the build writes)"
        )

    def handle(self, *args, **options):
        var_dir = Path(settings.VAR_DIR)
        records = Path(options["records"]) if options["records"] else var_dir / "images"
        images_dir = Path(settings.BASE_DIR) / "images"
        named = bool(options["names"])
        names = options["names"] or sorted(p.stem for p in records.glob("*.json"))
        if not names:
            raise CommandError(f"No built images in {records}: build one first (scripts/images.py build <name>).")
        try:
            registry = Registry.from_settings()
        except RegistryError as exc:
            raise CommandError(str(exc)) from exc
        failed = []
        for name in names:
            path = records / f"{name}.json"
            if not path.exists():
                self.stderr.write(f"{name}: not built ({path} is missing)")
                failed.append(name)
                continue
            try:
                record = build_record(path, images_dir=images_dir)
                if record.get("contract") is False and not named:
                    self.stdout.write(f"{name}: not an instance image (a base); name it to publish it")
                    continue
                done = image_publish(record=record, registry=registry, var_dir=var_dir)
            except RegistryError as exc:
                self.stderr.write(f"{name}: {exc}")
                failed.append(name)
                continue
            verb = "created" if done.created else "updated"
            catalogue = f"; image {done.slug} {verb}" if done.slug else ""
            self.stdout.write(
                f"{name}: {done.repository}:{done.tag} @ {done.digest} ({done.size_bytes} bytes){catalogue}"
            )
        if failed:
            raise CommandError(f"Not published: {', '.join(failed)}")
