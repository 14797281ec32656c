"""The ledger: accounts, transactions and their entries; priced units (SKUs) and the meters that use them.

Money is an integer number of fen (1/100 CNY) everywhere. The ledger is double-entry and append-only:
every transaction's entries sum to zero, and rows are never updated or deleted (the ORM refuses, and
on PostgreSQL a trigger refuses too). An account's ``balance`` is a cache of the sum of its entries,
kept in the same database transaction as the entries; ``ledger_check`` proves the two agree.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

# Ledger rows are history: corrections are new transactions, never edits. The guard lives in core,
# shared with accounts' security log; the error is re-exported for the callers that catch it here.
from core.appendonly import AppendOnlyError as AppendOnlyError
from core.appendonly import AppendOnlyModel
from core.statemachine import transition_table


class LedgerAccount(models.Model):
    """A place money sits. Users own wallet accounts; the platform owns the system accounts.

    ``floor`` is the lowest balance spending may reach (0 for wallets); ``None`` means unbounded,
    as for the platform's side of each posting (revenue, the gateway's clearing account…).
    """

    class Kind(models.TextChoices):
        CASH = "cash", _("Paid balance")  # a user's money from top-ups
        TRIAL = "trial", _("Trial credit")  # a user's trial credit: spent first, never paid out
        TRIAL_POOL = "trial_pool", _("Trial credit pool")  # where trial credit comes from
        REVENUE = "revenue", _("Revenue")  # usage charges land here
        TRIAL_REVENUE = "trial_revenue", _("Usage paid with trial credit")
        GATEWAY = "gateway", _("Payment gateway clearing")  # money in flight from/to the gateway
        ADJUSTMENTS = "adjustments", _("Staff adjustments")  # the other side of staff corrections

    USER_KINDS = (Kind.CASH, Kind.TRIAL)

    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="ledger_accounts"
    )
    currency = models.CharField(max_length=3, default="CNY")
    balance = models.BigIntegerField(_("balance (fen)"), default=0)
    floor = models.BigIntegerField(_("floor (fen)"), null=True, blank=True, default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("ledger account")
        verbose_name_plural = _("ledger accounts")
        constraints = [
            models.UniqueConstraint(fields=["kind", "owner"], name="billing_account_one_per_kind_owner"),
            models.UniqueConstraint(
                fields=["kind"], condition=models.Q(owner__isnull=True), name="billing_account_one_system_per_kind"
            ),
            # The last line of defence: even a bug in a service cannot push a wallet below its floor.
            models.CheckConstraint(
                condition=models.Q(floor__isnull=True) | models.Q(balance__gte=models.F("floor")),
                name="billing_account_balance_above_floor",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.owner or 'platform'}"


class Transaction(AppendOnlyModel):
    """One movement of money: a set of entries that sum to zero, posted at most once per key."""

    class Kind(models.TextChoices):
        TRIAL_GRANT = "trial_grant", _("Trial credit")
        TRIAL_EXPIRY = "trial_expiry", _("Trial credit expired")
        TOPUP = "topup", _("Top-up")
        REFUND = "refund", _("Refund")
        USAGE = "usage", _("Usage")
        ADJUSTMENT = "adjustment", _("Adjustment")
        TRANSFER = "transfer", _("Transfer")  # paid money moved between two wallets (a person's and a team's)

    idempotency_key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    description = models.CharField(_("description"), max_length=255, blank=True)
    # The user whose money moved (for fast per-user history); null for platform-only postings. A
    # transfer moves two users' money: this is the payer, and the payee finds it through its entries.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="transactions"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(_("time"), default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("transaction")
        verbose_name_plural = _("transactions")
        indexes = [models.Index(fields=["user", "-created_at"], name="billing_tx_user_time")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"


class Entry(AppendOnlyModel):
    """One leg of a transaction: ``amount`` fen added to (or, if negative, taken from) ``account``."""

    transaction = models.ForeignKey(Transaction, on_delete=models.PROTECT, related_name="entries")
    account = models.ForeignKey(LedgerAccount, on_delete=models.PROTECT, related_name="entries")
    amount = models.BigIntegerField(_("amount (fen)"))

    class Meta:
        verbose_name = _("entry")
        verbose_name_plural = _("entries")
        constraints = [models.CheckConstraint(condition=~models.Q(amount=0), name="billing_entry_nonzero")]

    def __str__(self) -> str:
        return f"{self.amount:+d} → {self.account_id}"


class Sku(models.Model):
    """A priced unit: ``price_fen`` per ``unit_seconds`` per unit of quantity.

    A GPU model is priced per card-hour (unit_seconds=3600, quantity = cards); disk per GB-day
    (unit_seconds=86400, quantity = GB). Other apps create their SKUs with ``sku_upsert``.
    """

    code = models.CharField(_("code"), max_length=64, unique=True)
    name = models.CharField(_("name"), max_length=128)
    unit = models.CharField(_("unit"), max_length=32)  # shown to people: "card-hour", "GB-day"
    price_fen = models.PositiveBigIntegerField(_("price (fen per unit)"))
    unit_seconds = models.PositiveIntegerField(_("seconds per unit"))
    # Storage keeps running when money runs out (the disk is kept, its debt collected on top-up);
    # everything else is stopped by the out-of-funds hook.
    is_storage = models.BooleanField(_("storage"), default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["code"]
        verbose_name = _("SKU")
        verbose_name_plural = _("SKUs")

    def __str__(self) -> str:
        return self.name


class Meter(models.Model):
    """Usage of ``quantity`` units of an SKU by one user for one resource (``ref``), from start to stop.

    The price is fixed when the meter starts. ``settled_seconds``/``charged_fen`` say how far billing
    has got; what is owed at any time is ``round(price × quantity × seconds / unit_seconds)`` computed
    once from the start, and each settlement posts the difference from ``charged_fen``, so the total
    is exact to one fen however many settlements it took.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="meters")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="meters")
    ref = models.CharField(_("resource"), max_length=200)
    description = models.CharField(_("description"), max_length=255, blank=True)
    quantity = models.PositiveIntegerField(_("quantity"))
    price_fen = models.PositiveBigIntegerField(_("price (fen per unit)"))
    unit_seconds = models.PositiveIntegerField()
    started_at = models.DateTimeField(_("started"))
    stopped_at = models.DateTimeField(_("stopped"), null=True, blank=True)
    settled_seconds = models.BigIntegerField(default=0)
    # What the meter owed at ``settled_seconds``. ``charged_fen`` lags it only when the balance ran
    # out: the difference is debt, collected by a later settlement after a top-up.
    owed_fen = models.BigIntegerField(_("owed (fen)"), default=0)
    charged_fen = models.BigIntegerField(_("charged (fen)"), default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name = _("meter")
        verbose_name_plural = _("meters")
        constraints = [
            # One open meter per resource: starting twice is a no-op, not a double charge.
            models.UniqueConstraint(
                fields=["ref"], condition=models.Q(stopped_at__isnull=True), name="billing_meter_one_open_per_ref"
            ),
        ]
        indexes = [
            models.Index(fields=["stopped_at"], name="billing_meter_open", condition=models.Q(stopped_at__isnull=True)),
            # What the settlement tick scans: open meters and closed ones still owing.
            models.Index(
                fields=["id"],
                name="billing_meter_to_settle",
                condition=models.Q(stopped_at__isnull=True) | models.Q(charged_fen__lt=models.F("owed_fen")),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sku} × {self.quantity} for {self.ref}"

    @property
    def is_open(self) -> bool:
        return self.stopped_at is None

    @property
    def debt_fen(self) -> int:
        """Used and not paid for: what the balance did not cover at the last settlement."""
        return max(0, self.owed_fen - self.charged_fen)

    @property
    def hourly_fen(self) -> float:
        """Display only: the price per hour of this meter (never used to compute a charge)."""
        return self.price_fen * self.quantity * 3600 / self.unit_seconds


# --- Top-ups through a payment gateway ------------------------------------------------------------


class TopUpOrder(models.Model):
    """A user's request to add ``amount_fen`` of paid money, paid through a payment gateway.

    The order is created ``pending`` and the user is sent to the gateway's checkout; the gateway's
    signed webhook moves it to ``paid`` (and credits the wallet, once) or ``failed``. Status only
    moves along ``TRANSITIONS``, through ``billing.payments.topup_order_transition``.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Awaiting payment")  # created; the user is at the gateway's checkout
        PAID = "paid", _("Paid")  # the gateway confirmed the payment; the wallet was credited
        FAILED = "failed", _("Failed")  # declined or abandoned at the gateway
        EXPIRED = "expired", _("Expired")  # never paid within the checkout's lifetime
        REFUNDED = "refunded", _("Refunded")  # all of it went back to the payer
        PARTIALLY_REFUNDED = "partially_refunded", _("Partially refunded")  # some of it went back

    # A late success after a decline or expiry still credits: the payer's money did arrive.
    TRANSITIONS = transition_table(
        {
            Status.PENDING: {Status.PAID, Status.FAILED, Status.EXPIRED},
            Status.FAILED: {Status.PAID},
            Status.EXPIRED: {Status.PAID},
            Status.PAID: {Status.REFUNDED, Status.PARTIALLY_REFUNDED},
            # A refund the gateway finally refuses is reversed: the money is the payer's again.
            Status.PARTIALLY_REFUNDED: {Status.REFUNDED, Status.PARTIALLY_REFUNDED, Status.PAID},
            Status.REFUNDED: {Status.PARTIALLY_REFUNDED, Status.PAID},
        }
    )
    BADGES = {
        Status.PENDING: "yellow",
        Status.PAID: "green",
        Status.FAILED: "red",
        Status.EXPIRED: "",
        Status.REFUNDED: "blue",
        Status.PARTIALLY_REFUNDED: "blue",
    }

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="topup_orders")
    amount_fen = models.PositiveBigIntegerField(_("amount (fen)"))
    currency = models.CharField(max_length=3, default="CNY")
    status = models.CharField(_("status"), max_length=20, choices=Status.choices, default=Status.PENDING)
    gateway = models.CharField(_("gateway"), max_length=40)
    # The gateway's own id for the checkout or payment, set when the checkout is created or paid.
    gateway_reference = models.CharField(_("gateway reference"), max_length=200, blank=True)
    # What the payer scans on the order page, for gateways that pay by QR code (WeChat Pay Native,
    # Alipay precreate): the gateway's code URL, rendered server-side. Empty for redirect checkouts.
    checkout_qr = models.CharField(_("checkout QR content"), max_length=500, blank=True)
    refunded_fen = models.BigIntegerField(_("refunded (fen)"), default=0)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    paid_at = models.DateTimeField(_("paid"), null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    refunded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("top-up order")
        verbose_name_plural = _("top-up orders")
        indexes = [models.Index(fields=["user", "-created_at"], name="billing_topup_user_time")]
        constraints = [
            models.CheckConstraint(condition=models.Q(amount_fen__gt=0), name="billing_topup_amount_positive"),
            models.CheckConstraint(
                condition=models.Q(refunded_fen__gte=0) & models.Q(refunded_fen__lte=models.F("amount_fen")),
                name="billing_topup_refund_within_amount",
            ),
        ]

    def __str__(self) -> str:
        return f"Top-up #{self.pk} ({self.amount_fen} fen, {self.status})"

    @property
    def badge(self) -> str:
        return self.BADGES.get(self.status, "")

    @property
    def refundable_fen(self) -> int:
        if self.status not in (self.Status.PAID, self.Status.PARTIALLY_REFUNDED):
            return 0
        return self.amount_fen - self.refunded_fen


class WebhookEvent(models.Model):
    """One webhook event accepted from a gateway: the replay guard.

    The gateway's event id is unique per gateway, so a redelivery (or an attacker's replay of a
    captured request) finds its row and changes nothing. ``payload_sha256`` tells a true redelivery
    (same body) from a conflicting reuse of an id.
    """

    gateway = models.CharField(max_length=40)
    event_id = models.CharField(max_length=200)
    event_type = models.CharField(max_length=64)
    order = models.ForeignKey(TopUpOrder, null=True, blank=True, on_delete=models.PROTECT, related_name="events")
    payload_sha256 = models.CharField(max_length=64)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name = _("webhook event")
        verbose_name_plural = _("webhook events")
        constraints = [
            models.UniqueConstraint(fields=["gateway", "event_id"], name="billing_webhook_event_once"),
        ]

    def __str__(self) -> str:
        return f"{self.gateway}:{self.event_id}"


class Refund(models.Model):
    """Paid money of a top-up sent back to the payer: a CASH → GATEWAY posting and the gateway's refund.

    ``key`` makes asking twice refund once. Trial credit is never refunded. The posting is made when
    the gateway accepts the refund (the money leaves the wallet at once, so it cannot be spent while
    on its way back); a gateway that settles refunds later (WeChat Pay's ``PROCESSING``, Stripe's
    ``pending``) leaves it ``pending`` until ``refunds_confirm`` asks again, and one it finally
    refuses is ``failed`` with a reversing posting (GATEWAY → CASH): corrections are new entries.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Processing")  # accepted by the gateway, not yet settled
        SUCCEEDED = "succeeded", _("Refunded")  # the gateway confirmed the money went back
        FAILED = "failed", _("Failed")  # the gateway could not send it back; reversed in the ledger

    order = models.ForeignKey(TopUpOrder, on_delete=models.PROTECT, related_name="refunds")
    amount_fen = models.PositiveBigIntegerField(_("amount (fen)"))
    reason = models.CharField(_("reason"), max_length=255)
    key = models.CharField(max_length=200, unique=True)
    gateway_refund_id = models.CharField(max_length=200)
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.SUCCEEDED)
    settled_at = models.DateTimeField(null=True, blank=True)  # when the gateway's final answer came
    transaction = models.OneToOneField(Transaction, on_delete=models.PROTECT, related_name="refund")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("refund")
        verbose_name_plural = _("refunds")
        constraints = [models.CheckConstraint(condition=models.Q(amount_fen__gt=0), name="billing_refund_positive")]

    def __str__(self) -> str:
        return f"Refund of {self.amount_fen} fen on {self.order}"


class LedgerCheckRun(models.Model):
    """One run of ``ledger_check``: whether the books balanced, and what disagreed when they did not."""

    checked_at = models.DateTimeField(_("checked at"), default=timezone.now, db_index=True)
    ok = models.BooleanField(_("balanced"))
    accounts_checked = models.PositiveIntegerField(default=0)
    transactions_checked = models.PositiveIntegerField(default=0)
    entries_total = models.BigIntegerField(_("sum of all entries (fen)"), default=0)
    problems = models.JSONField(default=list, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-checked_at", "-id"]
        verbose_name = _("ledger check")
        verbose_name_plural = _("ledger checks")

    def __str__(self) -> str:
        return f"{self.checked_at:%Y-%m-%d %H:%M} {'ok' if self.ok else 'MISMATCH'}"


class BalanceAlert(models.Model):
    """An episode of a user's money running low or out, from detection to resolution.

    One open episode per user and kind (a partial unique constraint), so the watcher can run any
    number of times, concurrently, and still warn once and call the out-of-funds hook once.
    """

    class Kind(models.TextChoices):
        LOW = "low", _("Low balance")  # the runway fell below BILLING_LOW_BALANCE_WARNING_S
        EXHAUSTED = "exhausted", _("Out of funds")  # runway zero, or used more than the balance covers

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="balance_alerts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    started_at = models.DateTimeField(default=timezone.now)
    runway_s = models.BigIntegerField(null=True, blank=True)  # the runway when the episode began
    # LOW: when the warning e-mail went out. EXHAUSTED: when the out-of-funds hook was called.
    notified_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name = _("balance alert")
        verbose_name_plural = _("balance alerts")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "kind"],
                condition=models.Q(resolved_at__isnull=True),
                name="billing_alert_one_open_per_user_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.user_id}"


class ReconciliationRun(models.Model):
    """One day's comparison of a gateway's bill (statement) with the ledger; rerunning a day replaces it.

    ``mismatches`` lists what disagreed, each ``{"kind", "order", "gateway_fen", "ledger_fen",
    "reference"}``: ``not_credited`` (the gateway settled a payment the ledger never credited),
    ``not_settled`` (the ledger credited a payment the bill lacks), ``amount_differs``,
    ``refund_differs``. Lines naming no order of ours (another shop on the account) are left out. ``error`` says why a day
    could not be compared (the bill was not ready); the next run tries again.
    """

    gateway = models.CharField(_("gateway"), max_length=40)
    day = models.DateField(_("day"))
    ran_at = models.DateTimeField(_("ran at"), default=timezone.now)
    ok = models.BooleanField(_("matches"), default=False)
    settled_lines = models.PositiveIntegerField(default=0)
    settled_fen = models.BigIntegerField(_("settled (fen)"), default=0)  # payments less refunds, by the bill
    ledger_fen = models.BigIntegerField(_("ledger (fen)"), default=0)  # the same, by the ledger
    mismatches = models.JSONField(default=list, blank=True)
    error = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-day", "gateway"]
        verbose_name = _("reconciliation")
        verbose_name_plural = _("reconciliations")
        constraints = [models.UniqueConstraint(fields=["gateway", "day"], name="billing_reconciliation_one_per_day")]

    def __str__(self) -> str:
        return f"{self.gateway} {self.day}: {'ok' if self.ok else 'mismatch'}"
