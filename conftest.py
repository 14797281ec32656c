"""Project-wide fixtures: the personas alice (owner), bob (same team, later) and charlie (stranger)."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.tests.factories import UserFactory


@pytest.fixture
def alice(db):
    return UserFactory(email="alice@example.com", display_name="Alice")


@pytest.fixture
def bob(db):
    return UserFactory(email="bob@example.com", display_name="Bob")


@pytest.fixture
def charlie(db):
    return UserFactory(email="charlie@example.com", display_name="Charlie")


@pytest.fixture
def staff(db):
    return UserFactory(email="staff@example.com", is_staff=True, is_superuser=True)


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def client_for():
    """``client_for(alice)`` → a test client logged in as alice."""
    return _client_for


@pytest.fixture
def alice_client(alice) -> Client:
    return _client_for(alice)


@pytest.fixture
def charlie_client(charlie) -> Client:
    return _client_for(charlie)


@pytest.fixture(autouse=True)
def _clear_cache():
    """Rate limits and throttles live in the cache: every test starts with none spent."""
    from django.core.cache import cache

    from core.memo import process_memos_forget

    # And what the process keeps of the catalogue and the fleet: a rolled-back test's rows must not outlive it.
    process_memos_forget()
    cache.clear()
    yield
    cache.clear()
    process_memos_forget()


@pytest.fixture(autouse=True)
def _legal_texts_in_force(request, _clear_cache):
    """The legal texts in force, read before the test as a running process holds them (privacy.selectors
    reads them once a minute at most), so a page's query budget counts what each request costs."""
    if "db" not in request.fixturenames:
        return
    request.getfixturevalue("db")
    from privacy.selectors import documents_in_force_ids

    documents_in_force_ids()


@pytest.fixture(autouse=True)
def _english_by_default():
    """A request in another language leaves it active in the thread: start every test in English."""
    from django.utils import translation

    translation.activate("en")
    yield
    translation.deactivate()


@pytest.fixture
def hooks_override():
    """``hooks_override(some_hook, fake, …)``: the hook answers with ``fake`` until the test ends (none:
    its declaration's own answer), as pytest-django's ``settings`` puts settings back (core.hooks)."""
    import contextlib

    with contextlib.ExitStack() as stack:

        def override(hook, *implementations) -> None:
            stack.enter_context(hook.override(*implementations))

        yield override
