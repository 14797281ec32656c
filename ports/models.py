"""A port a user declared on an instance, and the share links that make it public."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.revocable import Revocable
from core.user_content import proxy_link, proxy_public_link

MAX_PORT = 65535


class InstancePort(models.Model):
    """An HTTP server the owner runs on the instance; served at ``/i/<instance>/p<port>/`` to the owner."""

    instance = models.ForeignKey("instances.Instance", on_delete=models.CASCADE, related_name="ports")
    port = models.PositiveIntegerField(_("port"))
    name = models.CharField(_("name"), max_length=64, blank=True)  # "TensorBoard", "my Gradio demo"
    created_at = models.DateTimeField(_("added"), default=timezone.now)

    class Meta:
        ordering = ["port"]
        verbose_name = _("service port")
        verbose_name_plural = _("service ports")
        constraints = [
            models.UniqueConstraint(fields=["instance", "port"], name="ports_one_row_per_port"),
            models.CheckConstraint(condition=models.Q(port__gte=1, port__lte=MAX_PORT), name="ports_port_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.port} ({self.name})" if self.name else str(self.port)

    @property
    def service(self) -> str:
        """The proxy's service segment: ``p6006``."""
        return f"p{self.port}"

    @property
    def path(self) -> str:
        return f"{settings.CONSOLE_PROXY_PREFIX}{self.instance_id}/{self.service}/"

    @property
    def url(self) -> str:
        """The owner's link (through the sign-in hand-off when user content has its own host)."""
        return proxy_link(self.path)


class PortShare(Revocable):
    """A public link to a port: anyone with the URL reaches it, until it is revoked or expires.

    The token is stored as it is (the owner copies the link again from the list, as with an unlisted
    video's URL); it is 160 random bits, so it cannot be guessed. It works while its maker still
    operates the instance: a former member's links stop at once.
    """

    STATUS_BADGE = {**Revocable.STATUS_BADGE, Revocable.Status.REVOKED: ""}  # a revoked link: greyed, no alarm

    port = models.ForeignKey(InstancePort, on_delete=models.CASCADE, related_name="shares")
    # Who made it: the link lends their access, so it ends with it (``ports.proxy_targets``, and the revocation
    # when they leave the team). Null for links made before this was recorded: their instance's launcher
    # stands in.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("made by"),
    )
    token = models.CharField(max_length=64, unique=True)
    label = models.CharField(_("for"), max_length=64, blank=True)  # who has it: "the demo for Bob"
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    # expires_at, revoked_at and the status they give: core.revocable.Revocable

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("share link")
        verbose_name_plural = _("share links")

    def __str__(self) -> str:
        return self.label or self.token[:8]

    @property
    def service(self) -> str:
        return f"s-{self.token}"

    @property
    def path(self) -> str:
        return f"{settings.CONSOLE_PROXY_PREFIX}{self.port.instance_id}/{self.service}/"

    @property
    def url(self) -> str:
        """Anyone's link: on the user-content host when there is one."""
        return proxy_public_link(self.path)
