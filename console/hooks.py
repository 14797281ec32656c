"""What the console's proxy asks: who may open which server of which instance (``core.hooks``).

The proxy (``console/reverse_proxy.py``) carries user content; which upstream a request may reach is the
answer of the apps that know instances, deployments and ports. The console is the top layer, so it
wires them itself (``console/wiring.py``); tests and the benches swap in their own with
``proxy_target.override(…)``.
"""

from __future__ import annotations

from core.hooks import hook
from core.user_content import ProxyTarget


@hook(
    required=True,
    about="who may open which instance's servers (`lab`, `code`, `app`, `webui`), by session or by a deployment's API key",
)
def proxy_target(*, instance_id: str, service: str, user, api_key: str = "") -> ProxyTarget | None:
    """Where ``service`` (``lab``, ``code``, ``app``, ``webui``) of instance ``instance_id`` listens, if the
    session's ``user`` may open it, or, with ``api_key`` (``user`` None), whoever holds that key.
    None: not found, not yours or not running (the proxy answers 404). Runs in a thread, may query."""


@hook(about="who may open which declared port (`p<port>`, owner) or share link (`s-<token>`, anyone)")
def port_target(*, instance_id: str, service: str, user) -> ProxyTarget | None:
    """Where a user's own port (``p6006``, the owner only) or a share link to one (``s-<token>``, anyone:
    ``user`` may be None) is served. Without an answer no port is served."""
    return None
