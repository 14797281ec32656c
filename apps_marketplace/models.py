"""The marketplace catalogues: one-click apps, public models and public datasets.

Catalogue rows are shipped in ``apps_marketplace/data/`` and loaded by
:func:`apps_marketplace.loaders.marketplace_catalogue_load`; staff add and edit rows in the admin. A deployment
(a later issue) will reference an :class:`App`, a :class:`ModelEntry`, the parameters validated by
:func:`apps_marketplace.parameters.app_parameters_clean` and an instance.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from apps_marketplace.fit import BITS_PER_PARAMETER, CARD_COUNTS, PRECISIONS


class Source(models.TextChoices):
    """Where a public model or dataset is mirrored from."""

    HUGGINGFACE = "huggingface", _("Hugging Face")
    MODELSCOPE = "modelscope", _("ModelScope")


SOURCE_HOSTS = {Source.HUGGINGFACE: "https://huggingface.co", Source.MODELSCOPE: "https://modelscope.cn/models"}


class ModelTask(models.TextChoices):
    """What a model does, in Hugging Face's pipeline-tag vocabulary."""

    TEXT_GENERATION = "text-generation", _("Text generation")
    CODE_GENERATION = "code-generation", _("Code generation")
    IMAGE_TEXT_TO_TEXT = "image-text-to-text", _("Vision-language")
    TEXT_TO_IMAGE = "text-to-image", _("Text to image")
    TEXT_TO_VIDEO = "text-to-video", _("Text to video")
    SPEECH_RECOGNITION = "automatic-speech-recognition", _("Speech recognition")
    TEXT_TO_SPEECH = "text-to-speech", _("Text to speech")
    TEXT_TO_AUDIO = "text-to-audio", _("Text to audio")
    FEATURE_EXTRACTION = "feature-extraction", _("Embeddings")
    RERANKING = "text-ranking", _("Reranking")
    FILL_MASK = "fill-mask", _("Fill mask")
    TEXT_CLASSIFICATION = "text-classification", _("Text classification")
    TOKEN_CLASSIFICATION = "token-classification", _("Token classification")
    TRANSLATION = "translation", _("Translation")
    TEXT2TEXT = "text2text-generation", _("Text-to-text")
    SUMMARIZATION = "summarization", _("Summarization")
    IMAGE_CLASSIFICATION = "image-classification", _("Image classification")
    OBJECT_DETECTION = "object-detection", _("Object detection")
    IMAGE_SEGMENTATION = "image-segmentation", _("Image segmentation")
    ZERO_SHOT_IMAGE = "zero-shot-image-classification", _("Zero-shot image classification")
    DEPTH_ESTIMATION = "depth-estimation", _("Depth estimation")
    IMAGE_TO_TEXT = "image-to-text", _("Image to text")
    AUDIO_CLASSIFICATION = "audio-classification", _("Audio classification")


class DatasetTask(models.TextChoices):
    """What a dataset is for."""

    PRETRAINING = "pretraining", _("Pre-training corpus")
    INSTRUCTION = "instruction-tuning", _("Instruction tuning")
    PREFERENCE = "preference", _("Preference / RLHF")
    QUESTION_ANSWERING = "question-answering", _("Question answering")
    MATH = "math", _("Math and reasoning")
    CODE = "code", _("Code")
    EVALUATION = "evaluation", _("Evaluation benchmark")
    TEXT_CLASSIFICATION = "text-classification", _("Text classification")
    TOKEN_CLASSIFICATION = "token-classification", _("Token classification")
    SUMMARIZATION = "summarization", _("Summarization")
    TRANSLATION = "translation", _("Translation")
    IMAGE_CLASSIFICATION = "image-classification", _("Image classification")
    OBJECT_DETECTION = "object-detection", _("Object detection")
    IMAGE_SEGMENTATION = "image-segmentation", _("Image segmentation")
    IMAGE_TEXT = "image-text", _("Image-text pairs")
    SPEECH_RECOGNITION = "speech-recognition", _("Speech recognition")
    AUDIO = "audio", _("Audio")
    VIDEO = "video", _("Video")


class CatalogueEntry(models.Model):
    """Fields shared by public models and datasets: where they come from and where they are mounted."""

    repo_id = models.CharField(
        _("repository"),
        max_length=200,
        help_text=_("The organisation/name on the source, e.g. meta-llama/Llama-3.1-8B."),
    )
    name = models.CharField(_("name"), max_length=160)
    organisation = models.CharField(_("organisation"), max_length=100, db_index=True)
    size_bytes = models.BigIntegerField(_("size on disk (bytes)"))
    licence = models.CharField(_("licence"), max_length=64, db_index=True)
    source = models.CharField(_("source"), max_length=16, choices=Source.choices, default=Source.HUGGINGFACE)
    revision = models.CharField(_("revision"), max_length=64, default="main")
    description = models.TextField(_("description"), blank=True)
    mount_path = models.CharField(
        _("mount path"),
        max_length=255,
        help_text=_("Where the platform mounts it read-only inside instances and apps."),
    )
    is_active = models.BooleanField(_("listed"), default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    mount_root = "/"

    class Meta:
        abstract = True
        ordering = ["organisation", "name"]

    def __str__(self) -> str:
        return self.repo_id

    @property
    def source_url(self) -> str:
        host = SOURCE_HOSTS.get(self.source, "")
        if self.source == Source.HUGGINGFACE and self.mount_root == "/datasets":
            host = f"{host}/datasets"
        if self.source == Source.MODELSCOPE and self.mount_root == "/datasets":
            host = "https://modelscope.cn/datasets"
        return f"{host}/{self.repo_id}"

    @classmethod
    def default_mount_path(cls, repo_id: str) -> str:
        return f"{cls.mount_root}/{repo_id}"


class ModelEntry(CatalogueEntry):
    """A public model mirrored onto the platform's shared storage and mounted read-only at ``/models/...``.

    The architecture numbers (layers, hidden size, attention and KV heads, head dimension, context) come
    from the model's ``config.json``; the fit check needs them for the KV cache. They are empty for
    models where the KV cache does not apply (diffusion, CNNs).
    """

    mount_root = "/models"

    task = models.CharField(_("task"), max_length=40, choices=ModelTask.choices, db_index=True)
    parameter_count = models.BigIntegerField(_("parameters"), null=True, blank=True)
    num_layers = models.PositiveIntegerField(_("layers"), null=True, blank=True)
    hidden_size = models.PositiveIntegerField(_("hidden size"), null=True, blank=True)
    num_attention_heads = models.PositiveIntegerField(_("attention heads"), null=True, blank=True)
    num_kv_heads = models.PositiveIntegerField(_("KV heads"), null=True, blank=True)
    head_dim = models.PositiveIntegerField(_("head dimension"), null=True, blank=True)
    max_context_length = models.PositiveIntegerField(_("maximum context (tokens)"), null=True, blank=True)

    class Meta(CatalogueEntry.Meta):
        verbose_name = _("public model")
        verbose_name_plural = _("public models")
        constraints = [models.UniqueConstraint(fields=["source", "repo_id"], name="model_entry_unique_repo")]

    @property
    def has_kv_cache(self) -> bool:
        return bool(self.num_layers and self.num_kv_heads and self.head_dim)


class DatasetEntry(CatalogueEntry):
    """A public dataset mirrored onto shared storage and mounted read-only at ``/datasets/...``."""

    mount_root = "/datasets"

    task = models.CharField(_("task"), max_length=40, choices=DatasetTask.choices, db_index=True)
    num_rows = models.BigIntegerField(_("rows / examples"), null=True, blank=True)

    class Meta(CatalogueEntry.Meta):
        verbose_name = _("public dataset")
        verbose_name_plural = _("public datasets")
        constraints = [models.UniqueConstraint(fields=["source", "repo_id"], name="dataset_entry_unique_repo")]


# Page paths under /apps/ that an app slug must not shadow.
RESERVED_APP_SLUGS = frozenset({"models", "datasets", "deployments"})


def validate_app_slug(value: str) -> None:
    if value in RESERVED_APP_SLUGS:
        raise ValidationError(_("%(slug)s is reserved for a page under /apps/."), params={"slug": value})


class AppCategory(models.TextChoices):
    CHAT = "chat", _("Chat")
    IMAGE_GENERATION = "image-generation", _("Image generation")
    CODE_ASSISTANT = "code-assistant", _("Code assistant")
    SPEECH = "speech", _("Speech")
    NOTEBOOK_TOOLS = "notebook-tools", _("Notebook tools")


class RunsOn(models.TextChoices):
    """Where an app can run: what the marketplace shows on each app."""

    GPU = "gpu", _("GPU")
    CPU = "cpu", _("CPU")
    BOTH = "both", _("CPU or GPU")


class App(models.Model):
    """A one-click app: a container image and a start command serving a model behind a WebUI and/or an API.

    An app may also have a **CPU variant** (``cpu_image``, ``cpu_command_template``, ``cpu_port``): the
    image the console builds itself (``images/<name>``, a catalogue :class:`instances.models.Image`) and
    the command that serves the app without a GPU. A host without real cards runs that variant; a GPU
    host runs the main image and command (vLLM). ``runs_on`` says which the app offers.

    ``command_template`` (and ``webui_command_template`` for a separate WebUI process such as Open WebUI
    in front of a vLLM server) are rendered with :func:`apps_marketplace.parameters.app_command_render`:
    ``{name}`` placeholders are the app's parameters plus ``port``, ``webui_port``, ``api_key``,
    ``tensor_parallel_size`` and ``precision_flags`` (the engine's flags for the chosen precision, from
    ``precision_flags``).
    """

    slug = models.SlugField(unique=True, validators=[validate_app_slug])
    name = models.CharField(_("name"), max_length=96)
    tagline = models.CharField(_("tagline"), max_length=200)
    description = models.TextField(_("description"))
    category = models.CharField(_("category"), max_length=32, choices=AppCategory.choices, db_index=True)
    engine = models.CharField(_("engine"), max_length=64, help_text=_("The serving software, e.g. vLLM 0.6.3."))
    image = models.CharField(_("image"), max_length=200)
    image_size_bytes = models.BigIntegerField(_("image size (bytes)"))
    command_template = models.TextField(_("start command"))
    port = models.PositiveIntegerField(_("port"))
    webui_image = models.CharField(_("WebUI image"), max_length=200, blank=True)
    webui_image_size_bytes = models.BigIntegerField(_("WebUI image size (bytes)"), default=0)
    webui_command_template = models.TextField(_("WebUI start command"), blank=True)
    webui_port = models.PositiveIntegerField(_("WebUI port"), null=True, blank=True)
    webui_path = models.CharField(_("WebUI path"), max_length=100, default="/", blank=True)
    openai_compatible = models.BooleanField(_("OpenAI-compatible API"), default=False)
    api_path = models.CharField(_("API path"), max_length=100, blank=True)
    gpu_required = models.BooleanField(_("needs a GPU"), default=True)
    cpu_image = models.SlugField(
        _("CPU image"),
        blank=True,
        help_text=_("The catalogue image (built by make images) that runs the app on a host without a GPU."),
    )
    cpu_engine = models.CharField(_("CPU engine"), max_length=64, blank=True)
    cpu_command_template = models.TextField(_("CPU start command"), blank=True)
    cpu_port = models.PositiveIntegerField(_("CPU port"), null=True, blank=True)
    cpu_model = models.CharField(
        _("CPU model"), max_length=120, blank=True, help_text=_("What the CPU variant serves, in its image.")
    )
    supports_tensor_parallel = models.BooleanField(_("splits a model across cards"), default=False)
    precision_flags = models.JSONField(_("precision flags"), default=dict, blank=True)
    startup_seconds = models.PositiveIntegerField(
        _("engine start-up (s)"), default=30, help_text=_("Engine initialisation after the weights are read.")
    )
    served_models = models.ManyToManyField(ModelEntry, related_name="apps", blank=True, verbose_name=_("models served"))
    default_model = models.ForeignKey(
        ModelEntry, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", verbose_name=_("default model")
    )
    recommended_gpu_slug = models.SlugField(_("recommended GPU"), blank=True)
    recommended_gpu_count = models.PositiveSmallIntegerField(_("recommended cards"), default=1)
    model_recommendations = models.JSONField(
        _("recommendations per model"),
        default=dict,
        blank=True,
        help_text=_('{"org/model": ["gpu-slug", cards]} where a model needs other GPUs than the app default.'),
    )
    docs_url = models.URLField(_("documentation"), blank=True)
    sort_order = models.PositiveIntegerField(default=0)
    is_active = models.BooleanField(_("listed"), default=True)

    class Meta:
        ordering = ["sort_order", "name"]
        verbose_name = _("app")
        verbose_name_plural = _("apps")

    def __str__(self) -> str:
        return self.name

    @property
    def precisions(self) -> list[str]:
        """The precisions this app's engine offers, widest first (jsonb does not keep key order)."""
        return sorted(self.precision_flags, key=lambda key: PRECISIONS.index(key) if key in PRECISIONS else 99)

    @property
    def effective_webui_port(self) -> int:
        return self.webui_port or self.port

    @property
    def has_cpu_variant(self) -> bool:
        return bool(self.cpu_image and self.cpu_command_template)

    @property
    def runs_on(self) -> str:
        """``RunsOn``: GPU only, CPU only (needs no card), or both (a CPU variant beside the GPU engine)."""
        if not self.gpu_required:
            return RunsOn.CPU
        return RunsOn.BOTH if self.has_cpu_variant else RunsOn.GPU

    @property
    def runs_on_label(self) -> str:
        return RunsOn(self.runs_on).label

    def clean(self) -> None:
        errors = {}
        unknown = sorted(set(self.precision_flags or {}) - set(BITS_PER_PARAMETER))
        if not isinstance(self.precision_flags, dict) or unknown:
            errors["precision_flags"] = _("Use a mapping of precisions (%(known)s) to engine flags.") % {
                "known": ", ".join(BITS_PER_PARAMETER)
            }
        recommendations = self.model_recommendations
        if not isinstance(recommendations, dict) or any(
            not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and value[1] in CARD_COUNTS)
            for value in recommendations.values()
        ):
            errors["model_recommendations"] = _('Use {"org/model": ["gpu-slug", cards]} with 1, 2, 4 or 8 cards.')
        if errors:
            raise ValidationError(errors)

    def recommendation_for(self, model: ModelEntry | None) -> tuple[str, int] | None:
        """(GPU slug, cards) recommended for serving ``model`` with this app, if any."""
        if model is not None and model.repo_id in self.model_recommendations:
            slug, cards = self.model_recommendations[model.repo_id]
            return slug, int(cards)
        return (self.recommended_gpu_slug, self.recommended_gpu_count) if self.recommended_gpu_slug else None


class AppParameter(models.Model):
    """A setting a user may choose when deploying an app, with its type, default and validation."""

    class Kind(models.TextChoices):
        CHOICE = "choice", _("One of a list")
        INTEGER = "integer", _("Whole number")
        MODEL_PATH = "model_path", _("Model path")
        PATH = "path", _("Absolute path")

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="parameters")
    key = models.SlugField(_("key"), max_length=48)
    label = models.CharField(_("label"), max_length=96)
    kind = models.CharField(_("type"), max_length=16, choices=Kind.choices)
    default = models.CharField(_("default"), max_length=255, blank=True)
    choices = models.JSONField(_("choices"), default=list, blank=True)
    min_value = models.BigIntegerField(_("minimum"), null=True, blank=True)
    max_value = models.BigIntegerField(_("maximum"), null=True, blank=True)
    help_text = models.CharField(_("help"), max_length=255, blank=True)
    sort_order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["sort_order", "id"]
        verbose_name = _("app parameter")
        verbose_name_plural = _("app parameters")
        constraints = [models.UniqueConstraint(fields=["app", "key"], name="app_parameter_unique_key")]

    def __str__(self) -> str:
        return f"{self.app.slug}.{self.key}"


class Deployment(models.Model):
    """An app serving a model on one instance of the user's: the one-click deploy.

    The deployment owns no state machine of its own: its status is derived from its instance's status
    (:mod:`instances.services` moves it) plus the app's start-up steps, see :func:`deployment_status`.
    The API key is shown once when it is made and stored as its SHA-256.
    """

    class Step(models.TextChoices):
        SCHEDULING = "scheduling", _("Scheduling")
        PULLING = "pulling", _("Pulling the image")
        LOADING = "loading", _("Loading the model")
        READY = "ready", _("Ready")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="deployments")
    # The person who deployed it: in a team (``owner`` is the team's account) they may operate it as its
    # admins may (``teams.access``). The owner for a personal deployment; null once that person is gone.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="deployments", verbose_name=_("app"))
    model = models.ForeignKey(
        ModelEntry, on_delete=models.PROTECT, null=True, blank=True, related_name="deployments", verbose_name=_("model")
    )
    parameters = models.JSONField(_("parameters"), default=dict, blank=True)
    instance = models.OneToOneField(
        "instances.Instance", on_delete=models.PROTECT, related_name="deployment", verbose_name=_("instance")
    )
    api_key_hash = models.CharField(_("API key (SHA-256)"), max_length=64, unique=True)
    api_key_prefix = models.CharField(_("API key prefix"), max_length=16)
    created_at = models.DateTimeField(_("created"), default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("deployment")
        verbose_name_plural = _("deployments")

    def __str__(self) -> str:
        return f"{self.app.name} · {self.instance.name}"
