"""The vault's refusals: a ``code`` for programs, a message for people (the API's 4xx, the page's form)."""

from __future__ import annotations

from core.errors import Refusal


class SecretInvalid(Refusal):
    """A bad name or value: the API's 400, with ``field``."""

    code = "invalid"


class SecretExists(Refusal):
    """A create by a name the owner already uses (replacing is a PUT): the API's 409."""

    code = "secret_exists"


class SecretsLimit(Refusal):
    """The owner already keeps ``VAULT_MAX_SECRETS`` secrets: the API's 409."""

    code = "secrets_limit"


class CredentialInvalid(Refusal):
    """A bad host, user name or password for a registry credential: the API's 400, with ``field``."""

    code = "invalid"


class CredentialExists(Refusal):
    """The owner already has a credential for that registry (replacing it is a PUT): the API's 409."""

    code = "credential_exists"
