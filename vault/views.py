"""The Secrets page: the acting account's secrets by name (never a value), a form to save one, and for
each a new value or its deletion. In a team: listing needs a role that sees the team's resources, saving
one that may launch, and replacing or deleting another member's secret an admin (a 403 saying why)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import Refusal
from teams.access import Access, principal_access, request_acting, request_can, require_access, require_permission
from teams.roles import Permission
from vault import selectors, services
from vault.forms import RegistryCredentialForm, SecretCreateForm, SecretValueForm
from vault.models import NAME_RE, RegistryCredential, Secret


def _may_save_message() -> str:
    return _("Your role in this team does not allow saving secrets.")


def _secret(request: HttpRequest, name: str, *, operate: bool = False) -> Secret:
    if not NAME_RE.match(name):
        raise Http404
    secret = selectors.secret_get_for(owner=request_acting(request)[0], name=name)
    require_access(
        request,
        owner_id=secret.owner_id,
        created_by_id=secret.created_by_id,
        operate=operate,
        message=_("Only the secret's creator or a team admin can change it."),
    )
    return secret


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def secret_list(request: HttpRequest) -> HttpResponse:
    require_permission(request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources."))
    principal = request_acting(request)[0]
    if request.method == "POST":
        require_permission(request, Permission.RESOURCES_LAUNCH, _may_save_message())
    form = SecretCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            secret, _created = services.secret_set(
                owner=principal, actor=request.user, create_only=True, **form.cleaned_data
            )
        except Refusal as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(
                request,
                _("%(name)s saved. Choose it for an instance when you launch one, or on its page.")
                % {"name": secret.name},
            )
            return redirect("secrets")
    if form.is_bound:  # a value is never sent back to the browser, not even after a refusal
        form.data = form.data.copy()
        form.data["value"] = ""
    return _page(request, form=form, status=400 if form.is_bound else 200)


def _page(request: HttpRequest, *, form=None, credential_form=None, status: int = 200) -> HttpResponse:
    principal = request_acting(request)[0]
    rows = list(selectors.secret_list_for(owner=principal))
    for secret in rows:
        secret.can_operate = (
            principal_access(request, owner_id=secret.owner_id, created_by_id=secret.created_by_id) == Access.OPERATE
        )
    credentials = list(selectors.registry_credential_list_for(owner=principal))
    for credential in credentials:
        credential.can_operate = (
            principal_access(request, owner_id=credential.owner_id, created_by_id=credential.created_by_id)
            == Access.OPERATE
        )
    context = {
        "secrets": rows,
        "form": form or SecretCreateForm(),
        "may_save": request_can(request, Permission.RESOURCES_LAUNCH),
        "value_form": SecretValueForm(),
        "credentials": credentials,
        "credential_form": credential_form or RegistryCredentialForm(),
    }
    return render(request, "vault/list.html", context, status=status)


@login_required
@require_POST
def secret_replace(request: HttpRequest, name: str) -> HttpResponse:
    secret = _secret(request, name, operate=True)
    require_permission(request, Permission.RESOURCES_LAUNCH, _may_save_message())
    form = SecretValueForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("secrets")
    try:
        services.secret_set(
            owner=request_acting(request)[0], actor=request.user, name=secret.name, value=form.cleaned_data["value"]
        )
    except Refusal as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("The value of %(name)s was replaced; instances get it at their next start or restart.")
            % {"name": secret.name},
        )
    return redirect("secrets")


@login_required
@require_POST
def secret_delete(request: HttpRequest, name: str) -> HttpResponse:
    secret = _secret(request, name, operate=True)
    require_permission(request, Permission.RESOURCES_LAUNCH, _may_save_message())
    services.secret_delete(secret=secret, actor=request.user)
    if request.htmx:
        return HttpResponse("")  # the row goes
    messages.success(
        request, _("%(name)s deleted; instances that had it start without it from now on.") % {"name": secret.name}
    )
    return redirect("secrets")


@login_required
@require_POST
def registry_credential_add(request: HttpRequest) -> HttpResponse:
    """Save (or replace) the acting account's login to a private registry, from the Secrets page."""
    require_permission(request, Permission.RESOURCES_VIEW, _("Your role in this team does not show its resources."))
    require_permission(request, Permission.RESOURCES_LAUNCH, _may_save_message())
    form = RegistryCredentialForm(request.POST)
    if form.is_valid():
        principal = request_acting(request)[0]
        host = form.cleaned_data["host"].strip().lower()
        existing = RegistryCredential.objects.filter(owner=principal, host=host).first()
        try:
            if existing is not None:
                require_access(
                    request,
                    owner_id=existing.owner_id,
                    created_by_id=existing.created_by_id,
                    operate=True,
                    message=_("Only the credential's creator or a team admin can change it."),
                )
            services.registry_credential_set(owner=principal, actor=request.user, **form.cleaned_data)
        except Refusal as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(
                request, _("Login for %(host)s saved: import its private images on the Images page.") % {"host": host}
            )
            return redirect("secrets")
    form.data = form.data.copy()
    form.data["password"] = ""
    return _page(request, credential_form=form, status=400)


@login_required
@require_POST
def registry_credential_delete(request: HttpRequest, pk) -> HttpResponse:
    credential = get_object_or_404(selectors.registry_credential_list_for(owner=request_acting(request)[0]), pk=pk)
    require_access(
        request,
        owner_id=credential.owner_id,
        created_by_id=credential.created_by_id,
        operate=True,
        message=_("Only the credential's creator or a team admin can change it."),
    )
    require_permission(request, Permission.RESOURCES_LAUNCH, _may_save_message())
    services.registry_credential_delete(credential=credential, actor=request.user)
    messages.success(request, _("The login for %(host)s was deleted.") % {"host": credential.host})
    return redirect("secrets")
