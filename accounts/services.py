"""Writes for accounts: the profile, SSH public keys, API tokens and the security log.

Views, forms and the REST API call these; none of them holds a rule of its own. Refusals are Django
``ValidationError``s keyed by the input field they are about, so a form shows them beside the field and
the API answers 400 with the same messages.

A service that changes a credential writes its ``SecurityEvent`` in the same transaction, so the log
never shows a change that did not happen nor misses one that did. ``ip`` and ``user_agent`` are the
request's (``accounts.client.request_client``); callers without a request leave them out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from accounts.authentication import TOKEN_PREFIX, token_digest
from accounts.models import APIToken, SecurityEvent, SSHKey, User
from accounts.tokens import token_team_allowed, token_team_event

# --- The security log ----------------------------------------------------------------------------


def security_event_record(
    *,
    user: User,
    action: SecurityEvent.Action,
    ip: str | None = None,
    user_agent: str = "",
    details: dict | None = None,
) -> SecurityEvent:
    """Append one event to ``user``'s security log. A malformed IP is dropped, a long user agent cut."""
    if ip:
        try:
            ip = str(ipaddress.ip_address(ip))
        except ValueError:
            ip = None
    return SecurityEvent.objects.create(
        user=user,
        action=action,
        ip=ip or None,
        user_agent=(user_agent or "")[: SecurityEvent.USER_AGENT_MAX],
        details=details or {},
    )


def security_login_failed_record(*, email: str, ip: str | None = None, user_agent: str = "") -> SecurityEvent | None:
    """A refused log-in for ``email``: logged for the account with that address, if there is one.

    An address that matches nobody writes nothing and says nothing: the log must not become a way
    to learn which addresses have accounts. (Inactive accounts are logged too: their owner may come back.)
    """
    user = User.objects.filter(email__iexact=(email or "").strip()).first() if email else None
    if user is None:
        return None
    return security_event_record(user=user, action=SecurityEvent.Action.LOGIN_FAILED, ip=ip, user_agent=user_agent)


# --- Profile --------------------------------------------------------------------------------------


def user_profile_update(*, user: User, display_name: str, language: str | None = None) -> User:
    """Save the display name and, when given, the language (pages after log-in, e-mail, notifications)."""
    if language is not None and language not in dict(settings.LANGUAGES):
        raise ValidationError({"language": ValidationError(_("Choose one of the listed languages."), code="invalid")})
    display_name = " ".join(display_name.split())
    max_length = User._meta.get_field("display_name").max_length
    if len(display_name) > max_length:
        raise ValidationError(
            {"display_name": ValidationError(_("At most %(n)d characters.") % {"n": max_length}, code="max_length")}
        )
    user.display_name = display_name
    fields = ["display_name"]
    if language is not None:
        user.language = language
        fields.append("language")
    user.save(update_fields=fields)
    return user


# --- SSH keys -------------------------------------------------------------------------------------

RSA_MIN_BITS = 2048
# Key types we accept, by the name OpenSSH writes in front of the key.
ACCEPTED_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
_KEY_LINE_START = re.compile(r"^(ssh-|ecdsa-|sk-)", re.IGNORECASE)
_MAX_PASTE = 16_384  # an RSA-16384 public key is ~2.8 kB; anything much longer is not one key


@dataclass(frozen=True)
class ParsedKey:
    """A validated public key: ``public_key`` is the normalised one-line form, comment included."""

    key_type: str  # SSHKey.KeyType value
    bits: int
    fingerprint: str  # "SHA256:…", exactly as `ssh-keygen -l` prints it
    public_key: str
    comment: str


def _refuse(message: str, code: str, field: str = "public_key") -> ValidationError:
    return ValidationError({field: ValidationError(message, code=code)})


NON_FIELD = "non_field_errors"  # a refusal about no one field: above the form, the API error's own code


def _user_lock(user: User) -> None:
    """The person's row lock: two creates at once are counted one after the other, so a cap holds."""
    User.objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True).first()


def _active_tokens(*, user: User):
    """Tokens that still work: neither revoked nor expired (what the cap counts)."""
    now = timezone.now()
    return APIToken.objects.filter(user=user, revoked_at__isnull=True).exclude(expires_at__lte=now)


def ssh_fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a key blob: unpadded base64 of the digest."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def ssh_key_parse(text: str) -> ParsedKey:
    """Parse one OpenSSH public key line; raise ``ValidationError`` saying exactly what is wrong."""
    text = (text or "").strip()
    if not text:
        raise _refuse(_("Paste your public key, for example the contents of ~/.ssh/id_ed25519.pub."), "required")
    if "PRIVATE KEY" in text.upper():
        raise _refuse(
            _(
                "This is a PRIVATE key. Never paste or share it: paste the public key instead "
                "(the .pub file, e.g. ~/.ssh/id_ed25519.pub). If this private key was shared anywhere, "
                "consider it compromised and make a new one."
            ),
            "private_key",
        )
    if len(text) > _MAX_PASTE:
        raise _refuse(_("This is too long to be one public key."), "too_long")
    if text.startswith("---- BEGIN SSH2 PUBLIC KEY"):
        raise _refuse(
            _(
                "This key is in the RFC 4716 (SSH2) format. Convert it to OpenSSH's one-line format with "
                "`ssh-keygen -i -f key.pub` and paste the result."
            ),
            "rfc4716",
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if sum(1 for line in lines if _KEY_LINE_START.match(line)) > 1:
        raise _refuse(_("This contains several keys. Add them one at a time, each with its own name."), "multiple")
    if len(lines) > 1:
        raise _refuse(
            _("A public key is a single line. Copy it again without line breaks."),
            "multiline",
        )
    parts = lines[0].split()
    if parts[0] == "ssh-dss":
        raise _refuse(
            _("DSA keys are insecure and no longer accepted by OpenSSH. Create an Ed25519 key: ssh-keygen -t ed25519"),
            "dsa",
        )
    if len(parts) < 2:
        raise _refuse(
            _("This is not an SSH public key. It should look like: ssh-ed25519 AAAAC3Nz… you@laptop"), "invalid"
        )
    key_type_name, b64 = parts[0], parts[1]
    comment = " ".join(parts[2:])
    if key_type_name not in ACCEPTED_TYPES:
        if _KEY_LINE_START.match(key_type_name):
            raise _refuse(
                _("Keys of type %(type)s are not supported. Use one of: %(accepted)s.")
                % {"type": key_type_name, "accepted": ", ".join(ACCEPTED_TYPES)},
                "unsupported_type",
            )
        raise _refuse(
            _("This is not an SSH public key. It should look like: ssh-ed25519 AAAAC3Nz… you@laptop"), "invalid"
        )
    try:
        blob = base64.b64decode(b64, validate=True)
        key = serialization.load_ssh_public_key(f"{key_type_name} {b64}".encode())
    except (binascii.Error, ValueError, UnsupportedAlgorithm):
        raise _refuse(
            _("This public key is damaged: its data does not decode. Copy it again from the .pub file."),
            "invalid",
        ) from None

    if isinstance(key, ed25519.Ed25519PublicKey):
        key_type, bits = SSHKey.KeyType.ED25519, 256
    elif isinstance(key, ec.EllipticCurvePublicKey):
        key_type, bits = SSHKey.KeyType.ECDSA, key.curve.key_size
    elif isinstance(key, rsa.RSAPublicKey):
        key_type, bits = SSHKey.KeyType.RSA, key.key_size
        if bits < RSA_MIN_BITS:
            raise _refuse(
                _(
                    "This RSA key has %(bits)d bits; at least %(min)d are required. "
                    "Create a stronger key: ssh-keygen -t ed25519"
                )
                % {"bits": bits, "min": RSA_MIN_BITS},
                "weak_rsa",
            )
    else:  # pragma: no cover - ACCEPTED_TYPES admits nothing else
        raise _refuse(_("This key type is not supported."), "unsupported_type")

    # Re-serialise rather than trusting the paste: the stored key is exactly what OpenSSH would write.
    normalised = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    blob = base64.b64decode(normalised.split()[1])
    public_key = f"{normalised} {comment}" if comment else normalised
    return ParsedKey(
        key_type=key_type, bits=bits, fingerprint=ssh_fingerprint(blob), public_key=public_key, comment=comment
    )


def _ssh_key_name_clean(name: str) -> str:
    name = " ".join((name or "").split())
    max_length = SSHKey._meta.get_field("name").max_length
    if len(name) > max_length:
        raise _refuse(_("A name has at most %(n)d characters.") % {"n": max_length}, "max_length", "name")
    return name


def _ssh_key_name_check_free(*, user: User, name: str, exclude_id: int | None = None) -> None:
    taken = SSHKey.objects.filter(user=user, name__iexact=name).exclude(pk=exclude_id)
    if taken.exists():
        raise _refuse(
            _("You already have a key named “%(name)s”. Choose another name.") % {"name": name},
            "duplicate_name",
            "name",
        )


def ssh_key_add(*, user: User, name: str, public_key: str, ip: str | None = None, user_agent: str = "") -> SSHKey:
    """Validate and store a public key. Without a name, the key's comment (``you@laptop``) becomes it."""
    parsed = ssh_key_parse(public_key)
    name = _ssh_key_name_clean(name) or parsed.comment[: SSHKey._meta.get_field("name").max_length].strip()
    if not name:
        raise _refuse(_("Give this key a name, e.g. the computer it comes from."), "required", "name")
    existing = SSHKey.objects.filter(user=user, fingerprint=parsed.fingerprint).first()
    if existing is not None:
        raise _refuse(
            _("You already added this key, as “%(name)s”.") % {"name": existing.name},
            "duplicate_key",
        )
    _ssh_key_name_check_free(user=user, name=name)
    try:
        with transaction.atomic():
            _user_lock(user)
            if SSHKey.objects.filter(user=user).count() >= settings.ACCOUNTS_MAX_SSH_KEYS:
                cap = settings.ACCOUNTS_MAX_SSH_KEYS
                raise _refuse(
                    ngettext(
                        "You have %(n)d SSH key, the most allowed: delete it first.",
                        "You have %(n)d SSH keys, the most allowed: delete one you no longer use first.",
                        cap,
                    )
                    % {"n": cap},
                    "limit_reached",
                    NON_FIELD,
                )
            key = SSHKey.objects.create(
                user=user,
                name=name,
                public_key=parsed.public_key,
                key_type=parsed.key_type,
                bits=parsed.bits,
                fingerprint=parsed.fingerprint,
            )
            security_event_record(
                user=user,
                action=SecurityEvent.Action.SSH_KEY_ADDED,
                ip=ip,
                user_agent=user_agent,
                details={"name": key.name, "fingerprint": key.fingerprint},
            )
            return key
    except IntegrityError:
        # A concurrent request added the same key or name between our check and the insert.
        raise _refuse(_("You already added this key or a key with this name."), "duplicate") from None


def ssh_key_rename(*, key: SSHKey, name: str) -> SSHKey:
    name = _ssh_key_name_clean(name)
    if not name:
        raise _refuse(_("A key needs a name."), "required", "name")
    _ssh_key_name_check_free(user=key.user, name=name, exclude_id=key.pk)
    try:
        with transaction.atomic():
            SSHKey.objects.filter(pk=key.pk).update(name=name)
    except IntegrityError:
        raise _refuse(_("You already have a key with this name."), "duplicate_name", "name") from None
    key.name = name
    return key


def ssh_key_delete(
    *, user: User, key_id: int, ip: str | None = None, user_agent: str = "", by_staff: bool = False
) -> bool:
    """Delete one of ``user``'s keys. False when there is none such (already gone, or not theirs).

    Only the request that deleted the row logs it: a repeat finds nothing and writes nothing.
    ``by_staff``: deleted in the admin; the user's log says so (without staff's address).
    """
    with transaction.atomic():
        key = SSHKey.objects.select_for_update().filter(user=user, pk=key_id).first()
        if key is None:
            return False
        key.delete()
        security_event_record(
            user=user,
            action=SecurityEvent.Action.SSH_KEY_REMOVED,
            ip=ip,
            user_agent=user_agent,
            details={"name": key.name, "fingerprint": key.fingerprint, **({"by": "staff"} if by_staff else {})},
        )
    return True


# --- API tokens -----------------------------------------------------------------------------------

TOKEN_PREFIX_LENGTH = 12  # "gpuc_" + 7 random characters, shown in the list to tell tokens apart


def api_token_create(
    *,
    user: User,
    name: str,
    expires_at: datetime | None,
    scope: str = APIToken.Scope.FULL,
    ip: str | None = None,
    user_agent: str = "",
    via: str = "",
    team_id: int | None = None,
    rate_per_min: int | None = None,
) -> tuple[APIToken, str]:
    """Create a token and return it with its raw value, which exists only in this return value.

    ``scope`` is ``full`` or ``read`` (GET, HEAD and OPTIONS only; ``accounts.authentication``
    enforces it). ``via`` names what made it, when not the user's own form or API call (``device_login``).
    ``team_id`` scopes it to one of the user's teams (``accounts.tokens``): it acts on the team's account,
    and the team's audit log says who made it.
    """
    name = " ".join((name or "").split())
    if not name:
        raise _refuse(_("Give the token a name that says where it is used."), "required", "name")
    max_length = APIToken._meta.get_field("name").max_length
    if len(name) > max_length:
        raise _refuse(_("A name has at most %(n)d characters.") % {"n": max_length}, "max_length", "name")
    if expires_at is not None and expires_at <= timezone.now():
        raise _refuse(_("The expiry must be in the future."), "invalid", "expires_at")
    if scope not in APIToken.Scope.values:
        raise _refuse(
            _("Choose one of: %(choices)s.") % {"choices": ", ".join(APIToken.Scope.values)}, "invalid_choice", "scope"
        )
    if team_id is not None and not token_team_allowed(user=user, team_id=team_id):
        raise _refuse(_("Choose personal or one of your teams."), "invalid_choice", "team")
    if rate_per_min is not None:
        if rate_per_min < 1:
            raise _refuse(_("A token's limit is at least 1 request a minute."), "min_value", "rate_per_min")
        # Never more than the account's: what is asked above it is the account's limit, as it would be anyway.
        rate_per_min = min(rate_per_min, user.api_rate_per_min or settings.API_RATE_PER_MIN)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        _user_lock(user)
        if _active_tokens(user=user).count() >= settings.ACCOUNTS_MAX_API_TOKENS:
            cap = settings.ACCOUNTS_MAX_API_TOKENS
            raise _refuse(
                ngettext(
                    "You have %(n)d active API token, the most allowed: revoke it first.",
                    "You have %(n)d active API tokens, the most allowed: revoke one you no longer use first.",
                    cap,
                )
                % {"n": cap},
                "limit_reached",
                NON_FIELD,
            )
        token = APIToken.objects.create(
            user=user,
            name=name,
            prefix=raw[:TOKEN_PREFIX_LENGTH],
            digest=token_digest(raw),
            expires_at=expires_at,
            scope=scope,
            team_id=team_id,
            rate_per_min=rate_per_min,
        )
        details = {"name": token.name, "prefix": token.prefix, "scope": token.scope}
        if rate_per_min is not None:
            details["rate_per_min"] = rate_per_min
        if team_id is not None:
            details["team"] = team_id
        if via:
            details["via"] = via
        security_event_record(
            user=user, action=SecurityEvent.Action.TOKEN_CREATED, ip=ip, user_agent=user_agent, details=details
        )
        token_team_event(token=token, actor=user, action="created")
    return token, raw


def api_token_revoke(*, token: APIToken, ip: str | None = None, user_agent: str = "", by_staff: bool = False) -> bool:
    """Revoke ``token``. Revoking a revoked token is a no-op (False, nothing logged); the first
    revocation time stays. ``by_staff``: revoked in the admin; the user's log says so."""
    now = timezone.now()
    with transaction.atomic():
        revoked = APIToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        if revoked:
            security_event_record(
                user=token.user,
                action=SecurityEvent.Action.TOKEN_REVOKED,
                ip=ip,
                user_agent=user_agent,
                details={"name": token.name, "prefix": token.prefix, **({"by": "staff"} if by_staff else {})},
            )
            token_team_event(token=token, actor=None if by_staff else token.user, action="revoked")
    token.refresh_from_db(fields=["revoked_at"])
    return bool(revoked)
