"""An app's user-settable parameters: validation, defaults and the start command they produce.

A deployment stores the dict :func:`app_parameters_clean` returns; the same dict renders the start
command, so what the user saw on the app page is what runs.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from apps_marketplace.models import AppParameter, ModelEntry

if TYPE_CHECKING:
    from apps_marketplace.models import App

# organisation/name as on Hugging Face or ModelScope.
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# An absolute path of plain segments: no "..", no shell metacharacters, no spaces.
ABSOLUTE_PATH_RE = re.compile(r"^(/[A-Za-z0-9._-]+)+/?$")


def _path_ok(value: str) -> bool:
    return bool(ABSOLUTE_PATH_RE.match(value)) and ".." not in value.split("/")


def parameter_clean(parameter: AppParameter, raw: Any) -> Any:
    """One value, coerced to its type; raises ``ValidationError`` with a message for the user."""
    if raw is None or raw == "":
        raw = parameter.default
    if raw is None or raw == "":
        raise ValidationError(_("This parameter is required."), code="required")
    kind = parameter.kind
    if kind == AppParameter.Kind.INTEGER:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ValidationError(_("Enter a whole number."), code="invalid") from None
        if parameter.min_value is not None and value < parameter.min_value:
            raise ValidationError(_("At least %(min)s.") % {"min": parameter.min_value}, code="min_value")
        if parameter.max_value is not None and value > parameter.max_value:
            raise ValidationError(_("At most %(max)s.") % {"max": parameter.max_value}, code="max_value")
        return value
    value = str(raw).strip()
    if kind == AppParameter.Kind.CHOICE:
        if value not in parameter.choices:
            raise ValidationError(
                _("Choose one of: %(choices)s.") % {"choices": ", ".join(parameter.choices)}, code="invalid_choice"
            )
        return value
    if kind == AppParameter.Kind.MODEL_PATH:
        if REPO_ID_RE.match(value) or _path_ok(value):
            return value
        raise ValidationError(
            _("Enter an organisation/name such as meta-llama/Meta-Llama-3-8B-Instruct, or an absolute path."),
            code="invalid",
        )
    if kind == AppParameter.Kind.PATH:
        if _path_ok(value):
            return value
        raise ValidationError(_("Enter an absolute path such as /mnt/data/runs."), code="invalid")
    raise ValidationError(_("Unknown parameter type."), code="invalid")  # pragma: no cover - admin choices


def app_parameters_clean(*, app: App, values: dict[str, Any], model: ModelEntry | None = None) -> dict[str, Any]:
    """Every parameter of ``app``, validated, with defaults filled in; unknown keys are refused.

    ``model_path`` defaults to the chosen model's repository. Raises ``ValidationError`` mapping each
    bad key to its messages.
    """
    parameters = list(app.parameters.all())
    known = {parameter.key for parameter in parameters}
    errors: dict[str, list[str]] = {}
    for key in values:
        if key not in known:
            errors[key] = [_("This app has no parameter called %(key)s.") % {"key": key}]
    cleaned: dict[str, Any] = {}
    for parameter in parameters:
        raw = values.get(parameter.key)
        if parameter.kind == AppParameter.Kind.MODEL_PATH and not raw and model is not None:
            raw = model.repo_id
        try:
            cleaned[parameter.key] = parameter_clean(parameter, raw)
        except ValidationError as exc:
            errors[parameter.key] = exc.messages
    if errors:
        raise ValidationError(errors)
    return cleaned


def _model_location(model_path: str) -> tuple[str, str]:
    """(directory inside the container, served model name) for a repo id or an absolute path."""
    if model_path.startswith("/"):
        return model_path, model_path.rstrip("/").rsplit("/", 1)[-1]
    return ModelEntry.default_mount_path(model_path), model_path


def app_command_render(
    *,
    app: App,
    values: dict[str, Any],
    api_key: str = "$API_KEY",
    tensor_parallel_size: int = 1,
    for_backend: bool = False,
) -> tuple[str, str]:
    """The start command and (if the app has one) the WebUI command for cleaned ``values``.

    Values are shell-quoted; ``model_path`` becomes the read-only mount under /models for a repository
    id, so ``{model_path}`` in a template names a local directory. ``for_backend`` leaves ``{host}``,
    ``{port}`` and ``{base_path}`` for the backend that runs it (``AppLaunch``); otherwise they read as
    in the app's container (0.0.0.0, its port, served at /), which is what the app page shows.
    """
    context = _context(
        app=app,
        values=values,
        api_key=api_key,
        tensor_parallel_size=tensor_parallel_size,
        for_backend=for_backend,
        port=app.port,
    )

    def render(template: str) -> str:
        return " ".join(template.format_map(context).split())

    return render(app.command_template), render(app.webui_command_template) if app.webui_command_template else ""


def app_cpu_command_render(
    *, app: App, values: dict[str, Any], api_key: str = "$API_KEY", for_backend: bool = False
) -> str:
    """The CPU variant's start command (``App.cpu_command_template``) for cleaned ``values``, "" when
    the app has none. The same placeholders as :func:`app_command_render`; the model is the one in the
    variant's image, so ``model_path`` names nothing here."""
    if not app.has_cpu_variant:
        return ""
    context = _context(
        app=app, values=values, api_key=api_key, tensor_parallel_size=1, for_backend=for_backend, port=app.cpu_port
    )
    return " ".join(app.cpu_command_template.format_map(context).split())


def _context(
    *, app: App, values: dict[str, Any], api_key: str, tensor_parallel_size: int, for_backend: bool, port: int | None
) -> dict[str, str]:
    context: dict[str, str] = {key: shlex.quote(str(value)) for key, value in values.items()}
    if "model_path" in values:
        directory, name = _model_location(str(values["model_path"]))
        context["model_path"] = shlex.quote(directory)
        context["model_name"] = shlex.quote(name)
    precision = values.get("precision", "")
    context.update(
        host="{host}" if for_backend else "0.0.0.0",  # noqa: S104 (inside the app's own container)
        base_path="{base_path}" if for_backend else "/",
        port="{port}" if for_backend else str(port or app.port),
        webui_port="{webui_port}" if for_backend else str(app.effective_webui_port),
        api_key=api_key,
        tensor_parallel_size=str(tensor_parallel_size),
        precision_flags=str(app.precision_flags.get(precision, "")),
    )
    return context
