"""Forms of the storage pages. They validate shapes; the services decide."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from instances.models import Region
from storage.models import VolumeAttachment


class VolumeCreateForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=64)
    region = forms.ModelChoiceField(label=_("Region"), queryset=Region.objects.none(), empty_label=None)
    size_gb = forms.IntegerField(
        label=_("Size (GB)"), min_value=settings.STORAGE_VOLUME_MIN_GB, max_value=settings.STORAGE_VOLUME_MAX_GB
    )

    def __init__(self, *args, regions, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["region"].queryset = Region.objects.filter(pk__in=[r.pk for r in regions])
        self.fields["size_gb"].initial = 100


class VolumeResizeForm(forms.Form):
    size_gb = forms.IntegerField(label=_("New size (GB)"), min_value=1, max_value=settings.STORAGE_VOLUME_MAX_GB)


class AttachForm(forms.Form):
    instance = forms.ModelChoiceField(label=_("Instance"), queryset=None, empty_label=None)
    mount_path = forms.CharField(label=_("Mount path"), max_length=128, initial="/mnt/data")
    mode = forms.ChoiceField(label=_("Mode"), choices=VolumeAttachment.Mode.choices)

    def __init__(self, *args, instances, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["instance"].queryset = instances
