"""Hooks: how a lower app asks a higher one, declared in code where it is called.

The layers import downwards only (``.importlinter``), yet a lower app sometimes needs an answer only a
higher one knows: billing must stop a user's machines when the money runs out, instances must attach
storage's volumes at launch. The lower app *declares* a hook in its ``hooks`` module, as a stub whose
signature and docstring are the contract and whose body is what happens when no app above answers::

    # instances/hooks.py
    @hook
    def spend_guard(*, user, instance=None) -> str | None:
        \"\"\"Why compute may not start now for ``user``, or None. Without an answer, nothing is refused.\"\"\"
        return None

and calls it like the function it describes (``refusal = hooks.spend_guard(user=user)``). A higher app
*implements* it from its ``wiring`` module, registered in its ``AppConfig.ready()``::

    # budgets/wiring.py
    def wire() -> None:
        instance_hooks.spend_guard.implement(spend_guard)

A hook is ``single`` (one answer: a second implementation is a configuration error) or ``many``
(every implementation is called, in ``INSTALLED_APPS`` order). A single hook declared ``required``
has no fallback: calling it with nothing registered raises ``HookNotImplemented``, naming the hook.
Tests replace implementations for a while with ``with some_hook.override(fake): …``.

``manage.py hooks`` lists every hook, where it is declared and what implements it; ARCHITECTURE.md's
"who calls whom at run time" is that command's output.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

_registry: dict[str, Hook] = {}
_lock = threading.Lock()


class HookNotImplemented(ImproperlyConfigured):
    """A required hook was called and no installed app implements it."""


class Hook[T]:
    """One point where a lower app asks the apps above it.

    ``spec`` is the declaration: a function (its signature and docstring are the contract, its body the
    answer without an implementation) or a class (implementations are instances of a subclass; an
    instance of the class itself is the fallback). ``name`` defaults to ``<module>.<spec name>``;
    ``about`` is the one line ``manage.py hooks`` shows (by default the docstring's first sentence).
    """

    def __init__(self, spec: T, *, many: bool = False, required: bool = False, name: str = "", about: str = "") -> None:
        if many and required:
            raise ValueError("a hook with many implementations is never required: none is an empty answer")
        self.spec = spec
        self.many = many
        self.required = required
        self.module = spec.__module__
        self.name = name or f"{self.module}.{spec.__name__}"
        self.__doc__ = inspect.getdoc(spec) or ""
        self.about = about or _summary(self.__doc__)
        self._implementations: list[T] = []
        self._wired: list[T] | None = None  # the registered ones while a test overrides them
        self._fallback: T | None = None
        with _lock:
            if self.name in _registry:
                raise ImproperlyConfigured(f"hook {self.name} is declared twice")
            _registry[self.name] = self

    def __repr__(self) -> str:
        return f"<Hook {self.name}>"

    # --- the implementing side ----------------------------------------------------------------------

    def implement(self, implementation: T) -> T:
        """Register ``implementation`` (from an app's ``wiring`` module, in ``AppConfig.ready()``).

        Registering the same object again is harmless; a second, different implementation of a
        single hook is a configuration error, as two apps cannot both answer one question."""
        with _lock:
            if implementation in self._implementations:
                return implementation
            if not self.many and self._implementations:
                raise ImproperlyConfigured(
                    f"hook {self.name} is single and already implemented by {describe(self._implementations[0])}; "
                    f"{describe(implementation)} cannot implement it too"
                )
            self._implementations.append(implementation)
        return implementation

    @property
    def implementations(self) -> tuple[T, ...]:
        return tuple(self._implementations)

    @property
    def wired(self) -> tuple[T, ...]:
        """The implementations the apps registered, whatever a test overrides meanwhile (``manage.py hooks``)."""
        return tuple(self._wired if self._wired is not None else self._implementations)

    # --- the calling side ---------------------------------------------------------------------------

    def get(self) -> T:
        """A single hook's implementation, else its fallback (the declaration's own body, or an
        instance of the declared class). A required hook without one raises ``HookNotImplemented``."""
        if self.many:
            raise TypeError(f"hook {self.name} has many implementations: use all()")
        if self._implementations:
            return self._implementations[0]
        if self.required:
            raise HookNotImplemented(
                f"hook {self.name} has no implementation: the app that answers it is not installed, "
                f"or its AppConfig.ready() did not register it (see `manage.py hooks`)"
            )
        if self._fallback is None:
            self._fallback = self.spec() if inspect.isclass(self.spec) else self.spec
        return self._fallback

    def all(self) -> tuple[T, ...]:
        """A many hook's implementations, in the order their apps are installed."""
        if not self.many:
            raise TypeError(f"hook {self.name} is single: use get()")
        return tuple(self._implementations)

    @property
    def implemented(self) -> bool:
        return bool(self._implementations)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the hook as its declaration reads: a single hook returns its answer; a many hook
        returns the list of every implementation's answers."""
        if self.many:
            return [implementation(*args, **kwargs) for implementation in self._implementations]  # type: ignore[operator]
        return self.get()(*args, **kwargs)  # type: ignore[operator]

    # --- tests --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def override(self, *implementations: T) -> Iterator[None]:
        """Replace the implementations inside the block (none: the fallback answers), then put the
        registered ones back. For tests; not thread-safe against a concurrent ``implement``."""
        if not self.many and len(implementations) > 1:
            raise ValueError(f"hook {self.name} is single: override it with one implementation")
        saved, wired = self._implementations, self._wired
        if wired is None:
            self._wired = saved
        self._implementations = list(implementations)
        try:
            yield
        finally:
            self._implementations, self._wired = saved, wired


def hook(spec: Callable | None = None, /, *, many: bool = False, required: bool = False, about: str = "") -> Any:
    """Declare a hook from a stub function: ``@hook``, ``@hook(many=True)``, ``@hook(required=True, about=…)``."""

    def declare(function: Callable) -> Hook:
        return Hook(function, many=many, required=required, about=about)

    return declare(spec) if spec is not None else declare


def describe(implementation: object) -> str:
    """``module.name`` of a function, a class or an instance (its class), for listings and errors."""
    target = implementation if (inspect.isfunction(implementation) or inspect.isclass(implementation)) else None
    if target is None:
        target = getattr(implementation, "__func__", None) or type(implementation)
    return f"{target.__module__}.{target.__qualname__}"


def hooks_all() -> list[Hook]:
    """Every hook declared so far (the declaring modules must have been imported), by name."""
    return sorted(_registry.values(), key=lambda h: h.name)


def hooks_discover() -> list[Hook]:
    """Import every installed app's ``hooks`` module, so that hooks no code has called yet are listed too."""
    autodiscover_modules("hooks")
    return hooks_all()


def _summary(doc: str) -> str:
    """A docstring's first sentence, on one line, for a table cell."""
    text = " ".join(doc.split())
    end = re.search(r"[.:](\s|$)", text)
    return text[: end.start()] if end else text


def hooks_markdown() -> str:
    """Every hook as a Markdown table: the name, how many answer, what it is for (its docstring's first
    sentence), where it is declared and what implements it. ``manage.py hooks`` prints it; ARCHITECTURE.md
    carries it (a test keeps the two the same)."""
    rows = [
        "| hook | answers | what for | implemented by |",
        "|---|---|---|---|",
    ]
    for item in hooks_discover():
        answers = "many" if item.many else ("one, required" if item.required else "one")
        implemented = ", ".join(f"`{describe(i)}`" for i in item.wired) or "none (the declaration's own answer)"
        about = item.about.replace("|", "\\|")
        rows.append(f"| `{item.name}` | {answers} | {about} | {implemented} |")
    return "\n".join(rows) + "\n"
