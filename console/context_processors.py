from django.conf import settings


def console(request) -> dict:
    return {"SITE_NAME": settings.CONSOLE_SITE_NAME}
