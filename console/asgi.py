"""The ASGI entry point: Django for HTTP, Channels for WebSockets.

Paths under ``/i/`` (HTTP and WebSocket) go first to ``console.reverse_proxy``, the owner-only reverse proxy
to instances' JupyterLab and VS Code. WebSocket routes come from ``console.routing``; they pass the session (so consumers know the user)
and accept only connections whose Origin is one of ALLOWED_HOSTS, which stops cross-site WebSocket
hijacking of a logged-in user's session.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup(set_prefix=False)  # what django.core.asgi.get_asgi_application does, before its handler

from console.handlers import django_asgi_handler  # noqa: E402  (needs settings)

# Django's handler on a fixed set of request threads, or Django's own (core.speedups: "handlers")
django_asgi_app = django_asgi_handler()

from django.urls import get_resolver  # noqa: E402

# Import the URLconf, and every view module it names, now rather than in the first request each
# process serves: that request (the first launch after a deploy) would wait most of a second for it.
get_resolver().url_patterns  # noqa: B018 (read for its side effect: the import)

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.reverse_proxy import InstanceProxyRouter  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402

application = InstanceProxyRouter(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)
