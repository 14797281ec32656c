"""In the personal context the principal is whoever the request's user turns out to be, also when DRF
authenticates a token after the middleware ran (it then sets ``request.user`` to the token's user)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory

from teams.middleware import ActingContextMiddleware

pytestmark = pytest.mark.django_db


def test_the_personal_principal_follows_the_user_set_after_the_middleware(django_user_model):
    seen = {}

    def view(request):
        request.user = django_user_model.objects.create_user(email="token@example.com", password="x" * 12)
        seen["principal"], seen["membership"] = request.principal, request.membership
        return None

    request = RequestFactory().get("/api/v1/instances/")
    request.session, request.user = SessionStore(), AnonymousUser()
    ActingContextMiddleware(view)(request)
    assert seen["principal"].email == "token@example.com" and seen["principal"].pk == request.user.pk
    assert seen["membership"] is None
