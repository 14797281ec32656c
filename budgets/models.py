"""A user's monthly budget, and the alerts it has sent."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

THRESHOLDS = (50, 80, 100)  # percent of the budget that alert


class Budget(models.Model):
    """How much a user means to spend a month, in fen; with ``hard_cap``, compute stops at 100 %."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget")
    monthly_limit_fen = models.PositiveBigIntegerField(_("monthly budget (fen)"))
    hard_cap = models.BooleanField(_("stop compute at the budget"), default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("budget")
        verbose_name_plural = _("budgets")
        constraints = [
            models.CheckConstraint(condition=models.Q(monthly_limit_fen__gt=0), name="budgets_limit_positive")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.monthly_limit_fen} fen a month"


class BudgetAlert(models.Model):
    """A threshold crossed in a month: the unique row is what makes each alert go out once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField()  # the first day of the month, in TIME_ZONE
    threshold = models.PositiveSmallIntegerField()  # 50, 80 or 100
    spent_fen = models.BigIntegerField()  # when it crossed
    limit_fen = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("budget alert")
        verbose_name_plural = _("budget alerts")
        constraints = [
            models.UniqueConstraint(fields=["user", "month", "threshold"], name="budgets_alert_once_a_month")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.month:%Y-%m} {self.threshold} %"


class InstanceCap(models.Model):
    """ "Stop this one after ¥X": a spending limit on one instance (its GPU and disk meters, all its
    life). Reaching it stops the instance (the disk is kept) and refuses to start it again until the
    limit is raised or removed."""

    instance = models.OneToOneField("instances.Instance", on_delete=models.CASCADE, related_name="spending_cap")
    limit_fen = models.PositiveBigIntegerField(_("spending limit (fen)"))
    reached_at = models.DateTimeField(_("reached"), null=True, blank=True)  # its owner was told, once

    class Meta:
        verbose_name = _("instance spending limit")
        verbose_name_plural = _("instance spending limits")
        constraints = [models.CheckConstraint(condition=models.Q(limit_fen__gt=0), name="budgets_cap_positive")]

    def __str__(self) -> str:
        return f"{self.instance_id}: stop after {self.limit_fen} fen"
