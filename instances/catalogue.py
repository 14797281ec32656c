"""The demo catalogue: GPU models at realistic Chinese-market prices, images and regions.

Prices are per card-hour in fen, in line with what AutoDL-class clouds list in 2026.
"""

from __future__ import annotations

from django.conf import settings

from instances.models import GpuModel, Image, Region

REGIONS = [
    {"slug": "cn-north-1", "name": "North China 1 (Beijing)", "backend_alias": "default"},
    {"slug": "cn-east-1", "name": "East China 1 (Shanghai)", "backend_alias": "default"},
]

GPU_MODELS = [
    # slug, name, memory GB, fen per card-hour, CPU cores per card, RAM GB per card
    ("h200", "H200 141GB", 141, 1490, 16, 200),
    ("h800", "H800 80GB", 80, 1190, 16, 180),
    ("a800-80g", "A800 80GB", 80, 190, 14, 100),
    ("a100-40g", "A100 40GB", 40, 360, 12, 80),
    ("l40s", "L40S 48GB", 48, 260, 12, 80),
    ("rtx-4090", "RTX 4090 24GB", 24, 198, 16, 120),
    ("rtx-3090", "RTX 3090 24GB", 24, 132, 12, 60),
]

# The interruptible ("spot") tier's card-hour price in fen: about half, as spot markets list it.
SPOT_PRICES = {"h200": 745, "h800": 595, "a800-80g": 95, "a100-40g": 180, "l40s": 130, "rtx-4090": 99, "rtx-3090": 66}

IMAGES = [
    # slug, name, framework, version, CUDA, Python
    ("pytorch-2.5-cu124", "PyTorch 2.5.1 · CUDA 12.4", "PyTorch", "2.5.1", "12.4", "3.12"),
    ("pytorch-2.3-cu121", "PyTorch 2.3.0 · CUDA 12.1", "PyTorch", "2.3.0", "12.1", "3.12"),
    ("pytorch-2.1-cu118", "PyTorch 2.1.2 · CUDA 11.8", "PyTorch", "2.1.2", "11.8", "3.10"),
    ("tensorflow-2.16-cu123", "TensorFlow 2.16.1 · CUDA 12.3", "TensorFlow", "2.16.1", "12.3", "3.11"),
    ("jax-0.4-cu124", "JAX 0.4.30 · CUDA 12.4", "JAX", "0.4.30", "12.4", "3.11"),
    ("cuda-12.4-ubuntu22.04", "CUDA 12.4 · Ubuntu 22.04", "CUDA", "", "12.4", "3.10"),
]

# What each demo image weighs (bytes), as images of these contents do: the launch page shows it and the
# simulated cloud's pulls take as long as it says. ``images_publish`` records a built image's real size
# (and digest), which this never overwrites.
IMAGE_SIZES = {
    "pytorch-2.5-cu124": 8_900_000_000,
    "pytorch-2.3-cu121": 8_400_000_000,
    "pytorch-2.1-cu118": 7_600_000_000,
    "tensorflow-2.16-cu123": 6_200_000_000,
    "jax-0.4-cu124": 5_300_000_000,
    "cuda-12.4-ubuntu22.04": 3_100_000_000,
}


def backend_regions() -> dict[str, dict]:
    """The regions backends declare in their OPTIONS (``REGION`` and ``REGION_NAME``), by slug.

    A backend that serves one region of its own (the local backend: "This host", a Slurm cluster, a
    Kubernetes cluster) names it there; the demo regions belong to the simulated cloud ("default")
    unless a backend claims one of them.
    """
    declared = {}
    for alias, config in settings.PROVISIONING_BACKENDS.items():
        options = config.get("OPTIONS") or {}
        slug = options.get("REGION")
        if slug:
            declared[slug] = {"slug": slug, "name": options.get("REGION_NAME") or "", "backend_alias": alias}
    return declared


def catalogue_seed() -> None:
    """Create or update the demo catalogue, and a region for every backend that declares one; safe to
    run any number of times."""
    declared = backend_regions()
    # The demo regions are the simulated cloud's: seeded only where it is configured.
    demo = {region["slug"]: region for region in REGIONS} if "default" in settings.PROVISIONING_BACKENDS else {}
    for slug, region in {**demo, **declared}.items():
        defaults = {"backend_alias": region["backend_alias"]}
        name = region["name"] or demo.get(slug, {}).get("name") or slug
        Region.objects.update_or_create(slug=slug, defaults=defaults, create_defaults={**defaults, "name": name})
        if region["name"]:  # a name the settings give wins over one edited in the admin
            Region.objects.filter(slug=slug).update(name=region["name"])
    for order, (slug, name, memory, price, cores, ram) in enumerate(GPU_MODELS):
        GpuModel.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "memory_gb": memory,
                "price_per_card_hour_fen": price,
                "spot_price_per_card_hour_fen": SPOT_PRICES.get(slug),
                "cpu_cores_per_card": cores,
                "ram_gb_per_card": ram,
                "sort_order": order,
            },
        )
    for order, (slug, name, framework, version, cuda, python) in enumerate(IMAGES):
        Image.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "framework": framework,
                "framework_version": version,
                "cuda_version": cuda,
                "python_version": python,
                "sort_order": order,
            },
        )
        Image.objects.filter(slug=slug, digest="", size_bytes=0).update(size_bytes=IMAGE_SIZES.get(slug, 0))
