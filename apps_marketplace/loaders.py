"""Load the shipped catalogues (``apps_marketplace/data/``) into the database, idempotently.

Rows are keyed by (source, repository) for models and datasets and by slug for apps. Running the
loader again refreshes the shipped rows from the files and leaves rows staff added in the admin alone;
a shipped row staff unlisted (``is_active=False``) stays unlisted.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import yaml
from django.db import transaction

from apps_marketplace.models import App, AppParameter, DatasetEntry, ModelEntry, validate_app_slug

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class LoadResult:
    models: int
    datasets: int
    apps: int


def _int_or_none(value: str) -> int | None:
    value = (value or "").strip()
    return int(value) if value else None


def _billions(value: str) -> int:
    return int(Decimal(value) * 1_000_000_000)


def _gb_to_bytes(value: str) -> int:
    return int(Decimal(value) * 1_000_000_000)


def _split_repo(repo_id: str) -> tuple[str, str]:
    organisation, _, name = repo_id.partition("/")
    return organisation, name


def _sync(model_cls, rows: list[dict], fields: list[str]) -> int:
    """Create the missing rows and update changed ones, in bulk; returns how many rows the file holds."""
    existing = {(obj.source, obj.repo_id): obj for obj in model_cls.objects.all()}
    to_create, to_update = [], []
    for row in rows:
        obj = existing.get((row["source"], row["repo_id"]))
        if obj is None:
            to_create.append(model_cls(**row))
            continue
        if any(getattr(obj, name) != row[name] for name in fields):
            for name in fields:
                setattr(obj, name, row[name])
            to_update.append(obj)
    model_cls.objects.bulk_create(to_create, batch_size=500)
    if to_update:
        model_cls.objects.bulk_update(to_update, fields, batch_size=500)
    return len(rows)


def _common_fields(raw: dict, entry_cls) -> dict:
    """The columns models.csv and datasets.csv share."""
    organisation, name = _split_repo(raw["repo_id"])
    return {
        "repo_id": raw["repo_id"],
        "name": name,
        "organisation": organisation,
        "task": raw["task"],
        "size_bytes": _gb_to_bytes(raw["size_gb"]),
        "licence": raw["licence"],
        "source": raw["source"],
        "revision": raw.get("revision") or "main",
        "description": raw["description"],
        "mount_path": entry_cls.default_mount_path(raw["repo_id"]),
    }


def model_rows(path: Path | None = None) -> list[dict]:
    rows = []
    with open(path or DATA_DIR / "models.csv", newline="", encoding="utf-8") as handle:
        for raw in csv.DictReader(handle):
            rows.append(
                {
                    **_common_fields(raw, ModelEntry),
                    "parameter_count": _billions(raw["params_b"]),
                    "num_layers": _int_or_none(raw["layers"]),
                    "hidden_size": _int_or_none(raw["hidden"]),
                    "num_attention_heads": _int_or_none(raw["heads"]),
                    "num_kv_heads": _int_or_none(raw["kv_heads"]),
                    "head_dim": _int_or_none(raw["head_dim"]),
                    "max_context_length": _int_or_none(raw["context"]),
                }
            )
    return rows


def dataset_rows(path: Path | None = None) -> list[dict]:
    rows = []
    with open(path or DATA_DIR / "datasets.csv", newline="", encoding="utf-8") as handle:
        for raw in csv.DictReader(handle):
            rows.append({**_common_fields(raw, DatasetEntry), "num_rows": _int_or_none(raw["rows"])})
    return rows


APP_FIELDS = {
    # yaml key -> (model field, default)
    "name": ("name", None),
    "tagline": ("tagline", None),
    "description": ("description", None),
    "category": ("category", None),
    "engine": ("engine", None),
    "image": ("image", None),
    "command": ("command_template", None),
    "port": ("port", None),
    "webui_image": ("webui_image", ""),
    "webui_command": ("webui_command_template", ""),
    "webui_port": ("webui_port", None),
    "webui_path": ("webui_path", "/"),
    "openai_compatible": ("openai_compatible", False),
    "api_path": ("api_path", ""),
    "gpu_required": ("gpu_required", True),
    "cpu_image": ("cpu_image", ""),
    "cpu_engine": ("cpu_engine", ""),
    "cpu_command": ("cpu_command_template", ""),
    "cpu_port": ("cpu_port", None),
    "cpu_model": ("cpu_model", ""),
    "supports_tensor_parallel": ("supports_tensor_parallel", False),
    "startup_seconds": ("startup_seconds", 30),
    "precision_flags": ("precision_flags", {}),
    "recommended_gpu": ("recommended_gpu_slug", ""),
    "recommended_gpu_count": ("recommended_gpu_count", 1),
    "recommended_for": ("model_recommendations", {}),
    "docs_url": ("docs_url", ""),
}


def _apps_sync(path: Path | None = None) -> int:
    data = yaml.safe_load((path or DATA_DIR / "apps.yaml").read_text(encoding="utf-8"))
    models_by_repo = {entry.repo_id: entry for entry in ModelEntry.objects.all()}
    for order, spec in enumerate(data["apps"]):
        validate_app_slug(spec["slug"])
        defaults = {field: spec.get(key, default) for key, (field, default) in APP_FIELDS.items()}
        defaults["image_size_bytes"] = _gb_to_bytes(str(spec["image_size_gb"]))
        defaults["webui_image_size_bytes"] = _gb_to_bytes(str(spec.get("webui_image_size_gb", 0)))
        defaults["sort_order"] = order
        defaults["default_model"] = models_by_repo.get(spec["default_model"]) if spec.get("default_model") else None
        if spec.get("default_model") and defaults["default_model"] is None:
            raise ValueError(f"App {spec['slug']}: default model {spec['default_model']} is not in models.csv")
        app, _created = App.objects.update_or_create(slug=spec["slug"], defaults=defaults)
        served = []
        for repo_id in spec.get("models", []):
            if repo_id not in models_by_repo:
                raise ValueError(f"App {spec['slug']}: model {repo_id} is not in models.csv")
            served.append(models_by_repo[repo_id])
        app.served_models.set(served)
        keys = []
        for position, parameter in enumerate(spec.get("parameters", [])):
            keys.append(parameter["key"])
            AppParameter.objects.update_or_create(
                app=app,
                key=parameter["key"],
                defaults={
                    "label": parameter["label"],
                    "kind": parameter["kind"],
                    "default": str(parameter.get("default", "")),
                    "choices": parameter.get("choices", []),
                    "min_value": parameter.get("min"),
                    "max_value": parameter.get("max"),
                    "help_text": parameter.get("help", ""),
                    "sort_order": position,
                },
            )
        app.parameters.exclude(key__in=keys).delete()
    return len(data["apps"])


MODEL_FIELDS = [
    "name",
    "organisation",
    "task",
    "parameter_count",
    "size_bytes",
    "licence",
    "revision",
    "description",
    "mount_path",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "max_context_length",
]
DATASET_FIELDS = [
    "name",
    "organisation",
    "task",
    "num_rows",
    "size_bytes",
    "licence",
    "revision",
    "description",
    "mount_path",
]


@transaction.atomic
def marketplace_catalogue_load() -> LoadResult:
    """Load models, datasets and apps from the shipped files; safe to run any number of times."""
    models = _sync(ModelEntry, model_rows(), MODEL_FIELDS)
    datasets = _sync(DatasetEntry, dataset_rows(), DATASET_FIELDS)
    apps = _apps_sync()
    return LoadResult(models=models, datasets=datasets, apps=apps)
