"""What an instance is billed under: its meters' refs and the SKUs they price (billing's units).

A running instance's GPUs are metered per card-hour (one SKU per GPU model, priced from the
catalogue), or, run without cards (no-GPU mode), per machine-hour at the no-GPU price; a stopped one's disk per GB-day (storage: billing keeps it running when the money runs
out). ``instances.lifecycle`` opens and closes the meters as the status changes.
"""

from __future__ import annotations

from django.conf import settings

from billing.models import Sku
from billing.services import sku_upsert
from core.memo import process_memo_register
from instances.models import GpuModel, Instance


def gpu_meter_ref(instance_id) -> str:
    return f"instance:{instance_id}:gpu"


def disk_meter_ref(instance_id) -> str:
    return f"instance:{instance_id}:disk"


def instance_shape(instance: Instance) -> str:
    """ "8 × H200", or "2 nodes × 8 × H200" for a cluster, untranslated: the meter's description is data.
    A run without cards is "no GPU (CPU only)"."""
    if instance.no_gpu:
        return "no GPU (CPU only)"
    shape = f"{instance.gpu_count} × {instance.gpu_model.name}"
    return f"{instance.node_count} nodes × {shape}" if instance.node_count > 1 else shape


def gpu_sku_code(gpu_model: GpuModel, tier: str = Instance.Tier.ON_DEMAND) -> str:
    """``gpu.h800`` on demand, ``gpu.h800.spot`` interruptible: one SKU per model and tier, each its price."""
    return f"gpu.{gpu_model.slug}.spot" if tier == Instance.Tier.INTERRUPTIBLE else f"gpu.{gpu_model.slug}"


# The GPU SKUs this process has read, by code. SKUs are never deleted, and whether one still prices
# its model right is checked against the model as the caller read it, so a copy is as good as a read.
_gpu_skus: dict[str, Sku] = {}
process_memo_register(_gpu_skus.clear)


def gpu_sku_upsert(*, gpu_model: GpuModel, tier: str = Instance.Tier.ON_DEMAND) -> Sku:
    """The GPU model's SKU for ``tier``, priced from the catalogue. Read-only when it is already right:
    every instance that starts running passes here, and an update would make them queue on the SKU's row."""
    code, price = gpu_sku_code(gpu_model, tier), gpu_model.card_hour_price_fen(tier)
    sku = _gpu_skus.get(code)
    if sku is None or sku.price_fen != price:
        sku = Sku.objects.filter(code=code).first()
    if sku is not None and sku.price_fen == price and sku.unit_seconds == 3600:
        _gpu_skus[code] = sku
        return sku
    _gpu_skus.pop(code, None)
    spot = tier == Instance.Tier.INTERRUPTIBLE
    return sku_upsert(
        code=code,
        name=f"{gpu_model.name} GPU (interruptible)" if spot else f"{gpu_model.name} GPU",
        unit="card-hour",
        price_fen=price,
        unit_seconds=3600,
    )


NO_GPU_SKU_CODE = "instance.no_gpu"


def no_gpu_sku_upsert() -> Sku:
    """The SKU of a run without cards (no-GPU mode): per machine-hour at ``INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR``.
    Compute, not storage: it stops with the instance when the money runs out. Read-only when already right."""
    price = settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR
    sku = Sku.objects.filter(code=NO_GPU_SKU_CODE).first()
    if sku is not None and sku.price_fen == price and sku.unit_seconds == 3600 and not sku.is_storage:
        return sku
    return sku_upsert(
        code=NO_GPU_SKU_CODE, name="Instance without GPU", unit="machine-hour", price_fen=price, unit_seconds=3600
    )


def disk_sku_upsert() -> Sku:
    sku = Sku.objects.filter(code="disk.gb").first()
    if (
        sku is not None
        and sku.price_fen == settings.INSTANCES_DISK_PRICE_FEN_PER_GB_DAY
        and sku.unit_seconds == 86400
        and sku.is_storage
    ):
        return sku
    # Storage: billing keeps it running when the money runs out (the disk is what stopping keeps).
    return sku_upsert(
        code="disk.gb",
        name="Instance disk",
        unit="GB-day",
        price_fen=settings.INSTANCES_DISK_PRICE_FEN_PER_GB_DAY,
        unit_seconds=86400,
        is_storage=True,
    )


def catalogue_skus_sync() -> None:
    """Price every GPU model and the disk in billing (run after the catalogue changes)."""
    for gpu_model in GpuModel.objects.all():
        for tier in Instance.Tier.values:
            gpu_sku_upsert(gpu_model=gpu_model, tier=tier)
    disk_sku_upsert()
    no_gpu_sku_upsert()
