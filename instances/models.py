"""The GPU catalogue (regions, GPU models, images). Instances themselves come with the instances issue."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Region(models.Model):
    """A place where GPUs live, served by one provisioning backend (see PROVISIONING_BACKENDS)."""

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=64)
    backend_alias = models.CharField(_("backend"), max_length=32, default="default")
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("region")
        verbose_name_plural = _("regions")

    def __str__(self) -> str:
        return self.name


class GpuModel(models.Model):
    """A GPU model offered for rent, priced per card-hour in fen (1/100 CNY)."""

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=64)
    vendor = models.CharField(_("vendor"), max_length=32, default="NVIDIA")
    memory_gb = models.PositiveIntegerField(_("memory (GB)"))
    price_per_card_hour_fen = models.PositiveIntegerField(_("price per card-hour (fen)"))
    cpu_cores_per_card = models.PositiveIntegerField(_("CPU cores per card"), default=12)
    ram_gb_per_card = models.PositiveIntegerField(_("RAM (GB) per card"), default=90)
    sort_order = models.PositiveIntegerField(default=0)
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["sort_order", "name"]
        verbose_name = _("GPU model")
        verbose_name_plural = _("GPU models")

    def __str__(self) -> str:
        return self.name


class Image(models.Model):
    """A system image an instance boots from: a framework, its version and the CUDA it was built for."""

    slug = models.SlugField(unique=True)
    name = models.CharField(_("name"), max_length=96)
    framework = models.CharField(_("framework"), max_length=32)
    framework_version = models.CharField(_("framework version"), max_length=32, blank=True)
    cuda_version = models.CharField(_("CUDA version"), max_length=16)
    python_version = models.CharField(_("Python version"), max_length=16, blank=True)
    os = models.CharField(_("operating system"), max_length=32, default="Ubuntu 22.04")
    sort_order = models.PositiveIntegerField(default=0)
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["sort_order", "name"]
        verbose_name = _("image")
        verbose_name_plural = _("images")

    def __str__(self) -> str:
        return self.name
