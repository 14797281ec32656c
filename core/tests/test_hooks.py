"""core.hooks: a declaration's fallback, one or many answers, a required hook unanswered, overrides."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import hooks as hooks_registry
from core.hooks import Hook, HookNotImplemented, describe, hook


@pytest.fixture(autouse=True)
def _registry_kept():
    """The hooks these tests declare leave the process-wide registry with them (``manage.py hooks``'s
    listing, checked against ARCHITECTURE.md later in the same run, shows the project's hooks only)."""
    saved = dict(hooks_registry._registry)
    yield
    hooks_registry._registry.clear()
    hooks_registry._registry.update(saved)


def _unique(name: str) -> str:
    # The registry is process-wide: each test declares hooks under names of its own.
    return f"core.tests.test_hooks.{name}"


def test_a_single_hook_answers_with_its_declaration_until_implemented():
    def greeting(*, name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    greet = Hook(greeting, name=_unique("greet"))
    assert greet(name="ada") == "hello ada"
    assert not greet.implemented
    greet.implement(lambda *, name: f"bonjour {name}")
    assert greet(name="ada") == "bonjour ada"
    assert greet.about == "Say hello"


def test_a_second_implementation_of_a_single_hook_is_refused_and_the_same_one_again_is_harmless():
    def answer() -> int:
        return 0

    single = Hook(answer, name=_unique("single"))

    def one() -> int:
        return 1

    def two() -> int:
        return 2

    single.implement(one)
    single.implement(one)
    with pytest.raises(ImproperlyConfigured, match=re.escape("already implemented by core.tests.test_hooks")):
        single.implement(two)
    assert single() == 1


def test_a_required_hook_without_an_answer_names_itself():
    @hook(required=True)
    def must_answer(*, x: int) -> int:
        """Never called: required."""

    with pytest.raises(HookNotImplemented, match=re.escape("core.tests.test_hooks.must_answer has no implementation")):
        must_answer(x=1)


def test_many_hooks_call_every_answer_in_order():
    @hook(many=True)
    def moved(*, to: str) -> str:
        """Each answer is called."""

    moved.implement(lambda *, to: f"a:{to}")
    moved.implement(lambda *, to: f"b:{to}")
    assert moved(to="x") == ["a:x", "b:x"]
    assert len(moved.all()) == 2
    with pytest.raises(TypeError):
        moved.get()


def test_a_class_hook_falls_back_to_an_instance_of_the_declared_class():
    class Teller:
        def tell(self) -> str:
            return "nothing"

    class Loud(Teller):
        def tell(self) -> str:
            return "everything"

    tellers = Hook(Teller, name=_unique("tellers"))
    assert tellers.get().tell() == "nothing"
    assert tellers.get() is tellers.get()  # one fallback instance, not one per call
    tellers.implement(Loud())
    assert tellers.get().tell() == "everything"
    assert (
        describe(tellers.get())
        == "core.tests.test_hooks.test_a_class_hook_falls_back_to_an_instance_of_the_declared_class.<locals>.Loud"
    )


def test_override_replaces_the_answers_for_a_while_then_puts_them_back():
    @hook
    def colour() -> str:
        return "grey"

    colour.implement(lambda: "blue")
    with colour.override(lambda: "red"):
        assert colour() == "red"
    assert colour() == "blue"
    with colour.override():
        assert colour() == "grey"  # no answer: the declaration's own
    assert colour() == "blue"


def test_the_fixture_undoes_its_override_at_the_end_of_the_test(hooks_override):
    from notifications.hooks import recipients

    registered = recipients.implementations
    hooks_override(recipients, lambda *, user, kind, actor=None: [])
    assert recipients(user=object(), kind="x") == []
    assert recipients.implementations != registered


def test_the_fixture_left_the_registered_answer_in_place():
    from notifications.hooks import recipients
    from teams.notifications import team_notification_recipients

    assert recipients.implementations == (team_notification_recipients,)


def test_a_name_is_declared_once():
    def twice() -> None:
        return None

    Hook(twice, name=_unique("twice"))
    with pytest.raises(ImproperlyConfigured, match="declared twice"):
        Hook(twice, name=_unique("twice"))
