"""The data export's ZIP: a user's data as JSON (nested records) and CSV (tables a spreadsheet opens).

Read in chunks and written into a spooled temporary file, stopping with ``ExportTooLarge`` past a byte
limit, so one account with years of history cannot fill a worker's memory. Secrets never leave: API
tokens appear by prefix and name, SSH keys by fingerprint, deployments' keys by prefix.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
import zipfile
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from uuid import UUID

from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.models import APIToken, SecurityEvent, SSHKey
from apps_marketplace.models import Deployment
from billing.models import Entry, LedgerAccount, TopUpOrder
from identity.services import identity_export
from instances.models import Instance, InstanceEvent
from invoices.models import InvoiceRequest
from privacy.models import Acceptance
from storage.models import Volume
from teams.models import Membership
from vault.models import RegistryCredential, Secret

CHUNK = 2000  # rows read per database round trip


class ExportTooLarge(Exception):
    """The ZIP passed the byte limit: the export fails with a message rather than fill the worker."""


def _plain(value):
    if isinstance(value, datetime):
        return timezone.localtime(value).isoformat() if timezone.is_aware(value) else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    return value


class _Zip:
    """A ZIP being written, which refuses to grow past ``limit`` bytes (compressed, as stored)."""

    def __init__(self, file, limit: int) -> None:
        self.limit = limit
        self.file = file
        self.zip = zipfile.ZipFile(self.file, "w", compression=zipfile.ZIP_DEFLATED)

    def _check(self) -> None:
        if self.file.tell() > self.limit:
            raise ExportTooLarge

    def json(self, name: str, data) -> None:
        self.zip.writestr(name, json.dumps(data, ensure_ascii=False, indent=2, default=_plain))
        self._check()

    def csv(self, name: str, header: list[str], rows: Iterable[Iterable]) -> None:
        with self.zip.open(name, "w") as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")  # the BOM: Excel reads UTF-8
            writer = csv.writer(text)
            writer.writerow(header)
            for i, row in enumerate(rows):
                writer.writerow([_plain(v) for v in row])
                if i % CHUNK == 0:
                    text.flush()
                    self._check()
            text.flush()
            text.detach()
        self._check()

    def text(self, name: str, content: str) -> None:
        self.zip.writestr(name, content)

    def close(self) -> bytes:
        self.zip.close()
        self._check()
        self.file.seek(0)
        return self.file.read()


README = """\
{title}

{generated}

account.json        {account}
teams.json          {teams}
instances.csv       {instances}
instance_events.csv {events}
volumes.csv         {volumes}
deployments.csv     {deployments}
ledger_entries.csv  {ledger}
statements.csv      {statements}
topups.csv          {topups}
invoices.csv        {invoices}
security_log.csv    {security}

{amounts}
"""


def export_zip_build(*, user, limit_bytes: int) -> bytes:
    """Everything the console holds about ``user`` (as a person: their teams' resources are the teams')."""
    with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as file:
        out = _Zip(file, limit_bytes)
        try:
            return _export_write(out, user)
        finally:
            out.zip.close()  # a no-op once closed; after ExportTooLarge, before its file goes


def _export_write(out: _Zip, user) -> bytes:
    out.text(
        "README.txt",
        README.format(
            title=_("Your data from the console"),
            generated=_("Generated %(time)s for account %(id)s.") % {"time": timezone.now().isoformat(), "id": user.pk},
            account=_("your profile, SSH keys (fingerprints), API tokens (prefixes, never secrets), accepted terms"),
            teams=_("the teams you belong to and your role"),
            instances=_("your instances"),
            events=_("every instance's timeline (status changes and why)"),
            volumes=_("your volumes"),
            deployments=_("your app deployments (API keys by prefix only)"),
            ledger=_("every entry of your wallets (amounts in fen: 100 fen = 1 yuan)"),
            statements=_("totals per month and kind of entry"),
            topups=_("your top-ups"),
            invoices=_("your invoice requests"),
            security=_("your security log (log-ins, changed credentials)"),
            amounts=_("Amounts are integers in fen; times are ISO 8601."),
        ),
    )
    out.json("account.json", _account(user))
    out.json(
        "teams.json",
        [
            {"team": m.team.name, "slug": m.team.slug, "role": m.role, "joined": m.created_at}
            for m in Membership.objects.filter(user=user).select_related("team")
        ],
    )
    instances = (
        Instance.objects.filter(owner=user).select_related("region", "gpu_model", "image").order_by("created_at")
    )
    out.csv(
        "instances.csv",
        [
            "id",
            "name",
            "status",
            "region",
            "gpu_model",
            "gpu_count",
            "node_count",
            "image",
            "disk_gb",
            "hourly_price_fen",
            "tier",
            "created_at",
            "status_changed_at",
        ],
        (
            (
                i.pk,
                i.name,
                i.status,
                i.region.slug,
                i.gpu_model.slug,
                i.gpu_count,
                i.node_count,
                i.image.slug,
                i.disk_gb,
                i.hourly_price_fen,
                i.tier,
                i.created_at,
                i.status_changed_at,
            )
            for i in instances.iterator(chunk_size=CHUNK)
        ),
    )
    events = InstanceEvent.objects.filter(instance__owner=user).order_by("instance_id", "created_at", "id")
    out.csv(
        "instance_events.csv",
        ["instance", "time", "kind", "from", "to", "reason"],
        ((e.instance_id, e.created_at, e.kind, e.old, e.new, e.reason_text) for e in events.iterator(chunk_size=CHUNK)),
    )
    out.csv(
        "volumes.csv",
        ["id", "name", "status", "region", "size_gb", "created_at"],
        (
            (v.pk, v.name, v.status, v.region.slug, v.size_gb, v.created_at)
            for v in Volume.objects.filter(owner=user).select_related("region").order_by("created_at")
        ),
    )
    out.csv(
        "deployments.csv",
        ["id", "app", "instance", "api_key_prefix", "created_at"],
        (
            (d.pk, d.app.slug, d.instance_id, d.api_key_prefix, d.created_at)
            for d in Deployment.objects.filter(owner=user).select_related("app").order_by("created_at")
        ),
    )
    entries = (
        Entry.objects.filter(account__owner=user, account__kind__in=LedgerAccount.USER_KINDS)
        .select_related("transaction", "account")
        .order_by("transaction__created_at", "id")
    )
    monthly: dict[tuple[str, str, str], int] = {}

    def ledger_rows():
        for e in entries.iterator(chunk_size=CHUNK):
            t = e.transaction
            key = (timezone.localtime(t.created_at).strftime("%Y-%m"), e.account.kind, t.kind)
            monthly[key] = monthly.get(key, 0) + e.amount
            yield (t.created_at, t.pk, t.kind, t.description, e.account.kind, e.amount)

    out.csv("ledger_entries.csv", ["time", "transaction", "kind", "description", "wallet", "amount_fen"], ledger_rows())
    out.csv(
        "statements.csv",
        ["month", "wallet", "kind", "total_fen"],
        ((month, wallet, kind, total) for (month, wallet, kind), total in sorted(monthly.items())),
    )
    out.csv(
        "topups.csv",
        ["id", "amount_fen", "status", "gateway", "created_at", "paid_at", "refunded_fen"],
        (
            (o.pk, o.amount_fen, o.status, o.gateway, o.created_at, o.paid_at, o.refunded_fen)
            for o in TopUpOrder.objects.filter(user=user).order_by("created_at").iterator(chunk_size=CHUNK)
        ),
    )
    out.csv(
        "invoices.csv",
        [
            "id",
            "covers",
            "title_type",
            "title",
            "tax_number",
            "email",
            "amount_fen",
            "status",
            "invoice_number",
            "created_at",
        ],
        (
            (
                r.pk,
                r.kind,
                r.title_type,
                r.title,
                r.tax_number,
                r.email,
                r.amount_fen,
                r.status,
                r.invoice_number,
                r.created_at,
            )
            for r in InvoiceRequest.objects.filter(user=user).order_by("created_at")
        ),
    )
    out.csv(
        "security_log.csv",
        ["time", "action", "ip", "user_agent", "details"],
        (
            (s.created_at, s.action, s.ip or "", s.user_agent, json.dumps(s.details, ensure_ascii=False))
            for s in SecurityEvent.objects.filter(user=user).order_by("created_at").iterator(chunk_size=CHUNK)
        ),
    )
    return out.close()


def _account(user) -> dict:
    return {
        "id": user.pk,
        "email": user.email,
        "display_name": user.display_name,
        "language": user.language,
        "joined": user.date_joined,
        "last_login": user.last_login,
        # The mobile number and each real-name verification's verdict (never an ID number: none is kept).
        "identity": identity_export(user=user),
        "ssh_keys": [
            {"name": k.name, "type": k.key_type, "bits": k.bits, "fingerprint": k.fingerprint, "added": k.created_at}
            for k in SSHKey.objects.filter(user=user)
        ],
        # Names and dates only: a value is never given back, not even to its owner.
        "secrets": [
            {"name": s.name, "size": s.size, "created": s.created_at, "updated": s.updated_at}
            for s in Secret.objects.filter(owner=user)
        ],
        # Hosts and user names only: a password is never given back either.
        "registry_credentials": [
            {"registry": c.host, "username": c.username, "created": c.created_at, "updated": c.updated_at}
            for c in RegistryCredential.objects.filter(owner=user)
        ],
        "api_tokens": [
            {
                "name": t.name,
                "prefix": t.prefix,
                "access": t.scope,
                "team": t.team.name if t.team_id else None,
                "created": t.created_at,
                "expires": t.expires_at,
                "last_used": t.last_used_at,
                "revoked": t.revoked_at,
            }
            for t in APIToken.objects.filter(user=user).select_related("team")
        ],
        "accepted_documents": [
            {"document": a.document.kind, "version": a.document.version, "accepted": a.accepted_at, "ip": a.ip}
            for a in Acceptance.objects.filter(user=user).select_related("document")
        ],
    }
