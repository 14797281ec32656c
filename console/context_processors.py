from django.conf import settings
from django.utils.functional import SimpleLazyObject

from console.demo import demo_parts_enabled


def console(request) -> dict:
    # Lazy: only full pages (base.html's banner) ask, not the htmx partials.
    return {"SITE_NAME": settings.CONSOLE_SITE_NAME, "demo_parts": SimpleLazyObject(demo_parts_enabled)}
