"""Forms of the instance and quota pages. They validate shapes; the services decide."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from instances.hooks import volume_hooks
from instances.models import GpuModel, Image, Instance, QuotaRequest, Region
from instances.selectors import regions_offered
from instances.services import node_count_choices
from vault.selectors import secret_list_for


class LaunchForm(forms.Form):
    region = forms.ModelChoiceField(
        label=_("Region"), queryset=Region.objects.none(), empty_label=None, widget=forms.RadioSelect
    )
    gpu_model = forms.ModelChoiceField(
        label=_("GPU model"),
        queryset=GpuModel.objects.filter(is_active=True),
        empty_label=None,
        widget=forms.RadioSelect,
    )
    gpu_count = forms.TypedChoiceField(
        label=_("GPUs"),
        choices=[(n, str(n)) for n in Instance.GPU_COUNTS],
        coerce=int,
        initial=1,
        widget=forms.RadioSelect,
    )
    node_count = forms.TypedChoiceField(
        label=_("Nodes"),
        choices=[(1, "1")],
        coerce=int,
        initial=1,
        required=False,  # a form (or a script) that does not ask launches one node
        empty_value=1,
        widget=forms.RadioSelect,
        help_text=_("More than one makes a cluster: the GPUs above on each node, billed for every card."),
    )
    image = forms.ModelChoiceField(label=_("Image"), queryset=Image.objects.filter(is_active=True), empty_label=None)
    disk_gb = forms.IntegerField(
        label=_("Disk (GB)"),
        min_value=settings.INSTANCES_DISK_MIN_GB,
        max_value=settings.INSTANCES_DISK_MAX_GB,
        initial=settings.INSTANCES_DISK_DEFAULT_GB,
    )
    ssh_keys = forms.ModelMultipleChoiceField(
        label=_("SSH keys"), queryset=None, required=False, widget=forms.CheckboxSelectMultiple
    )
    name = forms.CharField(label=_("Name"), max_length=64, required=False, help_text=_("Optional; one is made up."))
    ports = forms.CharField(
        label=_("Service ports"),
        max_length=200,
        required=False,
        help_text=_("HTTP ports you will serve (TensorBoard 6006, Gradio 7860…), separated by commas; optional."),
    )
    tier = forms.ChoiceField(
        label=_("Tier"),
        choices=Instance.Tier.choices,
        initial=Instance.Tier.ON_DEMAND,
        required=False,  # a form (or a script) that does not ask launches on demand
        widget=forms.RadioSelect,
    )
    checkpoint_command = forms.CharField(
        label=_("Checkpoint command"),
        max_length=500,
        required=False,
        help_text=_("Interruptible only: runs when the instance is preempted, before it powers off."),
        widget=forms.TextInput(attrs={"placeholder": "python save.py /mnt/ckpt"}),
    )

    def __init__(self, *args, user, account=None, saved_images=(), **kwargs) -> None:
        """``user``: the person (their SSH keys); ``account``: whose volumes may be attached (a team's in its
        context; ``user`` when not given); ``saved_images``: the saved images they may launch from here."""
        super().__init__(*args, **kwargs)
        saved_ids = [image.pk for image in saved_images]
        if saved_ids:
            self.fields["image"].queryset = Image.objects.filter(Q(is_active=True) | Q(pk__in=saved_ids))
        self.fields["node_count"].choices = [(n, str(n)) for n in node_count_choices()]
        self.fields["region"].queryset = regions_offered()
        self.fields["ssh_keys"].queryset = user.ssh_keys.all()
        self.fields["ssh_keys"].initial = list(user.ssh_keys.values_list("pk", flat=True))
        first_region = self.fields["region"].queryset.first()
        first_gpu = self.fields["gpu_model"].queryset.first()
        self.fields["region"].initial = first_region.pk if first_region else None
        self.fields["gpu_model"].initial = first_gpu.pk if first_gpu else None
        self._add_volume_fields(account if account is not None else user)
        self._add_secret_fields(account if account is not None else user)

    def _add_secret_fields(self, account) -> None:
        """Per secret of the account that will own the instance: give it to the machine?, and also as a
        variable? ``clean`` turns them into ``secrets``."""
        self.secret_rows = []
        for secret in secret_list_for(owner=account):
            prefix = f"secret_{secret.name}"
            self.fields[f"{prefix}_use"] = forms.BooleanField(label=secret.name, required=False)
            self.fields[f"{prefix}_env"] = forms.BooleanField(label=_("Also a variable"), required=False)
            self.secret_rows.append({"secret": secret, "use": self[f"{prefix}_use"], "env": self[f"{prefix}_env"]})

    def _add_volume_fields(self, user) -> None:
        """Per volume the user could attach (``instances.hooks.volumes``): attach it?, where, how. ``clean``
        turns them into ``volumes``."""
        hooks = volume_hooks()
        self.volume_rows = []
        for volume in hooks.attachable(user=user):
            prefix = f"volume_{volume.pk.hex}"
            default_path = "/mnt/" + (re.sub(r"[^A-Za-z0-9._-]+", "-", volume.name).strip(".-") or "data")
            self.fields[f"{prefix}_attach"] = forms.BooleanField(label=volume.name, required=False)
            self.fields[f"{prefix}_path"] = forms.CharField(
                label=_("Mount path"), max_length=128, required=False, initial=default_path
            )
            self.fields[f"{prefix}_mode"] = forms.ChoiceField(
                label=_("Mode"),
                choices=hooks.mode_choices,
                initial=hooks.default_mode,
                required=False,
            )
            self.volume_rows.append(
                {
                    "volume": volume,
                    "attach": self[f"{prefix}_attach"],
                    "path": self[f"{prefix}_path"],
                    "mode": self[f"{prefix}_mode"],
                }
            )

    def clean_ports(self) -> list[int]:
        ports = []
        for part in re.split(r"[\s,]+", self.cleaned_data.get("ports") or ""):
            if not part:
                continue
            if not part.isdigit() or not 1 <= int(part) <= 65535:
                raise forms.ValidationError(_("A port is a number from 1 to 65535."))
            ports.append(int(part))
        return ports

    def clean(self) -> dict:
        data = super().clean()
        data["tier"] = data.get("tier") or Instance.Tier.ON_DEMAND
        volumes = []
        for row in self.volume_rows:
            prefix = f"volume_{row['volume'].pk.hex}"
            attach = data.pop(f"{prefix}_attach", False)
            path, mode = data.pop(f"{prefix}_path", ""), data.pop(f"{prefix}_mode", None)
            if attach:
                volumes.append((row["volume"], path or "", mode or "rw"))
        data["volumes"] = volumes
        secrets = []
        for row in self.secret_rows:
            prefix = f"secret_{row['secret'].name}"
            use, env = data.pop(f"{prefix}_use", False), data.pop(f"{prefix}_env", False)
            if use or env:  # asking for the variable gives the file too
                secrets.append((row["secret"], bool(env)))
        data["secrets"] = secrets
        return data


class InstanceSecretsForm(forms.Form):
    """The instance page's choice of the owner's secrets: per secret, give it?, and also as a variable?"""

    def __init__(self, *args, secrets, chosen: dict | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        chosen = chosen or {}
        self.rows = []
        for secret in secrets:
            use = forms.BooleanField(label=secret.name, required=False, initial=secret.pk in chosen)
            env = forms.BooleanField(label=_("Also a variable"), required=False, initial=chosen.get(secret.pk, False))
            self.fields[f"use_{secret.name}"], self.fields[f"env_{secret.name}"] = use, env
            self.rows.append({"secret": secret, "use": self[f"use_{secret.name}"], "env": self[f"env_{secret.name}"]})

    def clean(self) -> dict:
        data = super().clean()
        data["choices"] = [
            (row["secret"], bool(data.get(f"env_{row['secret'].name}")))
            for row in self.rows
            if data.get(f"use_{row['secret'].name}") or data.get(f"env_{row['secret'].name}")
        ]
        return data


class RenameForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=64)


class ResizeForm(forms.Form):
    """A running cluster's new size: one of ``instances.capacity.resize.resize_choices``."""

    node_count = forms.TypedChoiceField(label=_("Nodes"), coerce=int, choices=())

    def __init__(self, *args, choices: tuple[int, ...] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["node_count"].choices = [(n, str(n)) for n in choices]


class AutoStopForm(forms.Form):
    at = forms.DateTimeField(
        label=_("Stop at"), required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    idle_minutes = forms.IntegerField(
        label=_("Stop after idle minutes"), required=False, min_value=5, max_value=7 * 24 * 60
    )


class QuotaRequestForm(forms.ModelForm):
    class Meta:
        model = QuotaRequest
        fields = ["gpu_model", "cards", "duration_days", "reason"]
        labels = {
            "gpu_model": _("GPU model"),
            "cards": _("Cards you need at once"),
            "duration_days": _("For how many days"),
        }
        widgets = {"reason": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_model"].queryset = GpuModel.objects.filter(is_active=True)
        self.fields["duration_days"].initial = 30


_WHEN = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class QuotaDecisionForm(forms.Form):
    cards = forms.IntegerField(label=_("Cards"), min_value=1, required=False)
    days = forms.IntegerField(label=_("Days"), min_value=1, required=False)
    message = forms.CharField(label=_("Message to the user"), required=False, max_length=2000)
    # Approving may also reserve the granted cards in one region for the grant's window (or part of it).
    reserve = forms.BooleanField(label=_("Reserve the cards"), required=False)
    reserve_region = forms.ModelChoiceField(
        label=_("Region"), queryset=Region.objects.filter(is_active=True), required=False
    )
    reserve_starts_at = forms.DateTimeField(label=_("From (default: now)"), required=False, widget=_WHEN)
    reserve_ends_at = forms.DateTimeField(label=_("Until (default: the grant's end)"), required=False, widget=_WHEN)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("reserve") and not data.get("reserve_region"):
            self.add_error("reserve_region", _("Choose the region to reserve the cards in."))
        return data


class ReservationForm(forms.Form):
    """Staff's grant of reserved capacity; ``reservations.reservation_create`` checks the rest."""

    account = forms.CharField(
        label=_("Account"), max_length=254, help_text=_("A person's e-mail address, or a team's slug.")
    )
    region = forms.ModelChoiceField(label=_("Region"), queryset=Region.objects.filter(is_active=True))
    gpu_model = forms.ModelChoiceField(label=_("GPU model"), queryset=GpuModel.objects.filter(is_active=True))
    cards = forms.IntegerField(label=_("Cards"), min_value=1, max_value=4096)
    starts_at = forms.DateTimeField(label=_("From (default: now)"), required=False, widget=_WHEN)
    ends_at = forms.DateTimeField(label=_("Until"), widget=_WHEN)
    note = forms.CharField(label=_("Note"), required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class ImageSaveForm(forms.Form):
    """The instance page's "Save as image": the same service as ``POST …/save-image/`` in the API."""

    name = forms.CharField(
        label=_("Image name"),
        max_length=64,
        help_text=_("Lower-case letters and digits, with . _ - between them."),
        widget=forms.TextInput(attrs={"placeholder": "my-env", "pattern": "[a-z0-9]+([._-][a-z0-9]+)*"}),
    )
    tag = forms.CharField(label=_("Tag"), max_length=128, initial="latest")
    note = forms.CharField(label=_("Note"), max_length=500, required=False)


class ImageImportForm(forms.Form):
    reference = forms.CharField(
        label=_("Image reference"),
        max_length=300,
        widget=forms.TextInput(
            attrs={"placeholder": "registry.example.com/team/image:1.0", "class": "mono", "autocomplete": "off"}
        ),
    )
    name = forms.CharField(label=_("Image name"), max_length=64, required=False)
    tag = forms.CharField(label=_("Tag"), max_length=128, required=False)


class ImageBuildForm(forms.Form):
    recipe = forms.CharField(
        label=_("Recipe (Containerfile)"),
        strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "class": "mono", "spellcheck": "false", "autocomplete": "off"}),
    )
    name = forms.CharField(label=_("New image name"), max_length=64)
    tag = forms.CharField(label=_("Tag"), max_length=128, required=False, initial="latest")
    note = forms.CharField(label=_("Note"), max_length=500, required=False)


class ImageRenameForm(forms.Form):
    name = forms.CharField(label=_("Image name"), max_length=64)
    note = forms.CharField(label=_("Note"), max_length=500, required=False)


class SnapshotCreateForm(forms.Form):
    """The instance page's "Take a snapshot": the same service as ``POST …/snapshots/`` in the API."""

    name = forms.CharField(
        label=_("Snapshot name"),
        max_length=64,
        required=False,
        help_text=_("Empty: the date and time."),
        widget=forms.TextInput(attrs={"placeholder": _("before the upgrade")}),
    )


class SnapshotScheduleForm(forms.Form):
    """The instance page's snapshot schedule: every N hours, keep the last K; 0 hours turns it off."""

    every_hours = forms.IntegerField(
        label=_("Every (hours)"), min_value=0, max_value=168, help_text=_("0: no scheduled snapshots.")
    )
    keep = forms.IntegerField(label=_("Keep the last"), min_value=1, max_value=100, initial=3)


class CloneForm(forms.Form):
    """The instance page's "Clone": a new instance with this one's image and a copy of its disk."""

    name = forms.CharField(label=_("New instance's name"), max_length=64, required=False)
    snapshot = forms.CharField(max_length=40, required=False)
