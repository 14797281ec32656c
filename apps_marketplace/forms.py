"""Forms shared by the pages and the REST API: catalogue filters and the fit check's inputs."""

from __future__ import annotations

from django import forms
from django.core.validators import MaxValueValidator
from django.utils.translation import gettext_lazy as _

from apps_marketplace import fit
from apps_marketplace.models import App, AppCategory, DatasetTask, ModelEntry, ModelTask
from apps_marketplace.selectors import SIZE_BUCKETS, SORTS, app_fit_defaults, model_spec
from core.formatting import cny
from instances.models import GpuModel, Region
from storage.models import VolumeAttachment
from storage.selectors import attachable_volumes_for


class CatalogueFilterForm(forms.Form):
    """Search and filters for the model and dataset catalogues (pages and API alike)."""

    q = forms.CharField(label=_("Search"), required=False, max_length=100)
    task = forms.ChoiceField(label=_("Task"), required=False)
    licence = forms.CharField(label=_("Licence"), required=False, max_length=64)
    organisation = forms.CharField(label=_("Organisation"), required=False, max_length=100)
    size = forms.ChoiceField(
        label=_("Size"),
        required=False,
        choices=[("", _("Any size"))] + [(key, label) for key, (label, _lo, _hi) in SIZE_BUCKETS.items()],
    )
    sort = forms.ChoiceField(
        label=_("Sort"), required=False, choices=[(key, label) for key, (label, _fields) in SORTS.items()]
    )

    task_choices: list[tuple[str, str]] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", _("All tasks")), *self.task_choices]

    def clean_q(self) -> str:
        return " ".join(self.cleaned_data["q"].split())


class ModelFilterForm(CatalogueFilterForm):
    task_choices = ModelTask.choices


class DatasetFilterForm(CatalogueFilterForm):
    task_choices = DatasetTask.choices


class AppFilterForm(forms.Form):
    category = forms.ChoiceField(label=_("Category"), required=False, choices=[("", _("All")), *AppCategory.choices])
    q = forms.CharField(label=_("Search"), required=False, max_length=100)


class FitForm(forms.Form):
    """The fit check's inputs for one app: which of its models, at what precision, context and concurrency."""

    model = forms.ModelChoiceField(label=_("Model"), queryset=ModelEntry.objects.none(), to_field_name="repo_id")
    precision = forms.ChoiceField(label=_("Precision"))
    context_length = forms.IntegerField(
        label=_("Context length (tokens)"), min_value=fit.MIN_CONTEXT_LENGTH, required=False
    )
    concurrency = forms.IntegerField(
        label=_("Concurrent requests"),
        min_value=1,
        max_value=fit.MAX_CONCURRENCY,
        required=False,
        help_text=_("Sequences held at full context at once; the KV cache grows with each."),
    )

    def __init__(self, *args, app: App, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.app = app
        self.fields["model"].queryset = app.served_models.filter(is_active=True)
        self.fields["precision"].choices = [(key, key) for key in app.precisions if key in fit.BITS_PER_PARAMETER]
        parameters = {parameter.key: parameter for parameter in app.parameters.all()}
        context = parameters.get("context_length")
        self.uses_context = context is not None
        if context is not None and context.max_value:
            self.fields["context_length"].validators.append(MaxValueValidator(context.max_value))
            self.fields["context_length"].widget.attrs["max"] = context.max_value
        if not self.uses_context:
            # Image and speech engines have no KV cache: context and concurrency do not change the fit.
            del self.fields["context_length"]
            del self.fields["concurrency"]

    @classmethod
    def initial_for(cls, app: App) -> dict:
        return {
            "model": app.default_model.repo_id if app.default_model else None,
            **app_fit_defaults(app=app),
            "concurrency": 1,
        }

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("context_length") is None:
            cleaned["context_length"] = self.initial_for(self.app)["context_length"]
        if cleaned.get("concurrency") is None:
            cleaned["concurrency"] = 1
        model = cleaned.get("model")
        if model is not None and "precision" in cleaned and not self.errors:
            try:
                fit.workload_validate(self.workload(), model_spec(model))
            except fit.FitInputError as exc:
                self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return cleaned

    def workload(self) -> fit.Workload:
        data = self.cleaned_data
        return fit.Workload(
            precision=data["precision"], context_length=data["context_length"], concurrency=data["concurrency"]
        )


# Parameters the fit check's inputs set (the model path follows the chosen model).
FITTED_PARAMETERS = frozenset({"model_path", "precision", "context_length"})


class DeployForm(FitForm):
    """The app page's Deploy form: the fit check's inputs plus where and on what to run."""

    region = forms.ModelChoiceField(label=_("Region"), queryset=Region.objects.none(), to_field_name="slug")
    gpu_model = forms.ModelChoiceField(label=_("GPU model"), queryset=GpuModel.objects.none(), to_field_name="slug")
    gpu_count = forms.TypedChoiceField(
        label=_("GPUs"), coerce=int, choices=[(n, str(n)) for n in fit.CARD_COUNTS], initial=1
    )

    def __init__(self, *args, app: App, user=None, **kwargs) -> None:
        super().__init__(*args, app=app, **kwargs)
        self.fields.pop("concurrency", None)
        if user is not None:
            self._add_volume_fields(user)
        if not app.served_models.filter(is_active=True).exists():  # tools such as TensorBoard serve no model
            self.fields["model"].required = False
        if not self.fields["precision"].choices:  # nor hold weights at a precision
            del self.fields["precision"]
        # The app's other parameters (a log directory, ...), validated by app_parameters_clean on deploy.
        for parameter in app.parameters.all():
            if parameter.key not in FITTED_PARAMETERS:
                self.fields[f"param_{parameter.key}"] = forms.CharField(
                    label=parameter.label, required=False, initial=parameter.default, help_text=parameter.help_text
                )
        self.fields["region"].queryset = Region.objects.filter(is_active=True)
        self.fields["gpu_model"].queryset = GpuModel.objects.filter(is_active=True).order_by("sort_order", "name")
        self.fields["gpu_model"].label_from_instance = lambda gpu: (
            _("%(name)s · %(price)s per card-hour")
            % {
                "name": gpu.name,
                "price": cny(gpu.price_per_card_hour_fen),
            }
        )

    @classmethod
    def initial_for(cls, app: App, model: ModelEntry | None = None) -> dict:
        initial = super().initial_for(app)
        recommendation = app.recommendation_for(model or app.default_model)
        if recommendation:
            initial["gpu_model"], initial["gpu_count"] = recommendation
        region = Region.objects.filter(is_active=True).order_by("name").first()
        initial["region"] = region.slug if region else None
        return initial

    def _add_volume_fields(self, user) -> None:
        """One of the user's volumes mounted into the app: training output served without an upload
        (a checkpoint directory as the model path, a log directory for TensorBoard)."""
        volumes = list(attachable_volumes_for(user=user))
        if not volumes:
            return
        self.fields["volume"] = forms.TypedChoiceField(
            label=_("Volume"),
            required=False,
            choices=[("", _("None"))] + [(str(v.pk), f"{v.name} · {v.region.name}") for v in volumes],
            help_text=_("Mounted into the app's instance; point a path parameter at it."),
        )
        self.fields["volume_path"] = forms.CharField(label=_("Mount path"), max_length=128, initial="/mnt/data")
        self.fields["volume_mode"] = forms.ChoiceField(
            label=_("Mode"), choices=VolumeAttachment.Mode.choices, initial=VolumeAttachment.Mode.READ_ONLY
        )
        self._volumes = {str(v.pk): v for v in volumes}

    def volumes(self) -> list[tuple]:
        """``[(volume, mount_path, mode)]`` for ``deployment_create`` (empty when none was chosen)."""
        chosen = self.cleaned_data.get("volume")
        if not chosen:
            return []
        return [(self._volumes[chosen], self.cleaned_data.get("volume_path") or "", self.cleaned_data["volume_mode"])]

    def parameters(self) -> dict:
        """The app parameters this form sets (the model path follows the chosen model)."""
        keys = {parameter.key for parameter in self.app.parameters.all()}
        values = {key: self.cleaned_data.get(key) for key in ("precision", "context_length")}
        values.update({key: self.cleaned_data.get(f"param_{key}") for key in keys - FITTED_PARAMETERS})
        return {key: value for key, value in values.items() if key in keys and value not in (None, "")}
