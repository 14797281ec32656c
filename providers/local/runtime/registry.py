"""The host's one ``LocalRuntime``, configured by ``settings.LOCAL_RUNTIME``, and its proxy resolver.

``proxy_target_for`` is the resolver ``console.reverse_proxy`` uses until the instances app plugs in its
Instance model: the ownership record is the ``owner_ref`` the runtime stored at start
(``owner_ref_for(user)``), so only the user who started an instance reaches its servers.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from core.user_content import ProxyTarget
from providers.local.runtime.containers import ContainerRuntime
from providers.local.runtime.gpus import GpuInventory, gpu_discover
from providers.local.runtime.podman import Podman
from providers.local.runtime.servers import APP, CODE, CODE_SERVER_COOKIE, LAB, WEBUI
from providers.local.runtime.supervisor import LocalRuntime, LocalRuntimeError


def runtime_from_options(options: dict) -> LocalRuntime | ContainerRuntime:
    """A runtime from a settings-style dict (upper-case keys, as ``LOCAL_RUNTIME`` and backend OPTIONS).

    ``ENGINE``: "podman" (the default: each instance a container of its image, in its tenant's uid
    range) or "process" (the servers as processes of the console's account: a single-tenant host)."""
    if options.get("ENGINE", "podman") == "podman":
        kwargs = {
            "root": options.get("ROOT") or settings.BASE_DIR / "var/instances",
            "podman": Podman(conf_dir=options.get("CONTAINERS_DIR", "")),
            "port_low": options.get("PORT_LOW", 20000),
            "port_high": options.get("PORT_HIGH", 29999),
            "url_prefix": getattr(settings, "CONSOLE_PROXY_PREFIX", "/i/"),
            "public_mounts": options.get("PUBLIC_MOUNTS") or {},
            "images": options.get("IMAGES") or {},
            "limits": options.get("LIMITS") or {},
            "code_server_dir": str(Path(options["CODE_SERVER_ENTRY"]).parents[4])
            if options.get("CODE_SERVER_ENTRY")
            else "",
            "node_bin": options.get("NODE_BIN", ""),
        }
        if options.get("DEFAULT_IMAGE"):
            kwargs["default_image"] = options["DEFAULT_IMAGE"]
        if "FIREWALL" in options:
            kwargs["firewall"] = bool(options["FIREWALL"])
        if "EGRESS_DENY" in options:
            kwargs["egress_deny"] = tuple(options["EGRESS_DENY"])
        if "CDI_SPEC_DIRS" in options:
            kwargs["cdi_spec_dirs"] = tuple(options["CDI_SPEC_DIRS"])
        if "SERVICES" in options:
            kwargs["services"] = tuple(options["SERVICES"])
        return ContainerRuntime(**kwargs)
    kwargs = {
        "root": options.get("ROOT") or settings.BASE_DIR / "var/instances",
        "jupyter_bin": options.get("JUPYTER_BIN", ""),
        "code_server_entry": options.get("CODE_SERVER_ENTRY", ""),
        "node_bin": options.get("NODE_BIN", "node"),
        "sshd_bin": options.get("SSHD_BIN", ""),
        "port_low": options.get("PORT_LOW", 20000),
        "port_high": options.get("PORT_HIGH", 29999),
        "url_prefix": getattr(settings, "CONSOLE_PROXY_PREFIX", "/i/"),
        "public_mounts": options.get("PUBLIC_MOUNTS") or {},
    }
    if "SERVICES" in options:
        kwargs["services"] = tuple(options["SERVICES"])
    return LocalRuntime(**kwargs)


@cache
def get_runtime() -> LocalRuntime | ContainerRuntime:
    return runtime_from_options(getattr(settings, "LOCAL_RUNTIME", {}))


def host_gpus() -> GpuInventory:
    """This host's cards, or ``SIMULATED_GPUS`` simulated ones when it has no NVIDIA GPU."""
    options = getattr(settings, "LOCAL_RUNTIME", {})
    return gpu_discover(
        nvidia_smi=options.get("NVIDIA_SMI", "nvidia-smi"),
        simulated=options.get("SIMULATED_GPUS", 8),
        simulated_name=options.get("SIMULATED_GPU_NAME", "NVIDIA H200"),
    )


@receiver(setting_changed)
def _reset_runtime(*, setting: str, **kwargs) -> None:
    if setting in ("LOCAL_RUNTIME", "CONSOLE_PROXY_PREFIX"):
        get_runtime.cache_clear()


def owner_ref_for(user) -> str:
    return f"user-{user.pk}"  # the same label as the instances app's InstanceSpec.owner_ref


def proxy_target(runtime: LocalRuntime | ContainerRuntime, *, key: str, service: str) -> ProxyTarget | None:
    """The proxy target of one server of ``key`` (no ownership check: callers do that)."""
    try:
        upstream = runtime.upstream(key, service)
    except LocalRuntimeError:
        return None
    if upstream is None:
        return None
    if service == LAB:
        return ProxyTarget(
            host=upstream.host,
            port=upstream.port,
            strip_prefix=False,
            headers=(("Authorization", f"token {upstream.secret}"),),
            secrets=(upstream.secret,),
        )
    if service == CODE:
        return ProxyTarget(
            host=upstream.host,
            port=upstream.port,
            strip_prefix=True,
            cookies=((CODE_SERVER_COOKIE, upstream.secret),),
            secrets=(upstream.secret,),
        )
    if service == WEBUI:
        webui = ((runtime.meta(key) or {}).get("app") or {}).get("webui") or {}
        return ProxyTarget(host=upstream.host, port=upstream.port, strip_prefix=not webui.get("serves_base_path", True))
    if service == APP:
        app = (runtime.meta(key) or {}).get("app") or {}
        return ProxyTarget(
            host=upstream.host,
            port=upstream.port,
            strip_prefix=not app.get("serves_base_path", True),
            # For servers that take a key (vLLM's --api-key $APP_API_KEY); others ignore it.
            headers=(("Authorization", f"Bearer {upstream.secret}"),),
            secrets=(upstream.secret,),
        )
    return None


def proxy_target_for(*, instance_id: str, service: str, user, api_key: str = "") -> ProxyTarget | None:
    """``console.hooks.proxy_target`` for instances started on this host's runtime: owner only."""
    if api_key or user is None:
        return None
    runtime = get_runtime()
    try:
        meta = runtime.meta(instance_id)
    except LocalRuntimeError:
        return None
    if not meta or meta.get("owner_ref") != owner_ref_for(user):
        return None
    return proxy_target(runtime, key=instance_id, service=service)
