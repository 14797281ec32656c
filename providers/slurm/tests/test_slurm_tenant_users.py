"""Without a cluster: a Slurm job runs as its tenant's own Unix user, never as root. The command line
submits with ``sbatch --uid``; the REST path authenticates as the tenant with a token the console mints
from the cluster's JWT key; ``REST_USER=root`` is a configuration error; a site that provisions its
users (LDAP/SSSD) gets a clear reason when one is missing."""

from __future__ import annotations

import base64
import json
import pwd

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import PermanentBackendError
from providers.base import Tenant
from providers.slurm.backend import SlurmBackend
from providers.slurm.rest import SlurmRest
from providers.slurm.tenants import TenantAccounts, jwt_mint
from providers.slurm.tests.slurm_fake import TENANT, spec
from providers.slurm.tests.slurm_fake import cli_backend as _backend

KEY = "6f1c2a9b-03de-4f00-9000-000000000005"


def _spec(**kwargs):
    """One card; the tenant is each test's to give (or to leave out)."""
    return spec(gpu_count=1, **{"tenant": None, **kwargs})


def test_the_command_line_submits_the_job_as_its_tenant_and_the_job_refuses_any_other_user(tmp_path):
    backend, cli = _backend(tmp_path)
    state = backend.create(key=KEY, spec=_spec(tenant=TENANT))
    args, script = cli.calls[-1], cli.scripts[-1]
    assert "--uid=79001" in args and "--gid=79001" in args
    assert backend.tenants.ensured == [TENANT]
    assert backend.tenants.handed[tmp_path / KEY] == TENANT  # its directory is the tenant's
    assert '[ "$(id -u)" != 79001 ]' in script and script.index("id -u") < script.index("srun")
    assert state["tenant"]["name"] == "gpuc-t9001"
    # A start without a spec (the console's repair path) keeps the tenant.
    assert backend._spec_from_state(KEY, state, "").tenant == TENANT


@pytest.mark.parametrize("tenant", [None, Tenant("root", 0, 1 << 30), Tenant("daemon", 1, 1 << 30)])
def test_a_machine_without_a_tenant_or_of_a_system_user_is_refused(tmp_path, tenant):
    backend, cli = _backend(tmp_path)
    with pytest.raises(PermanentBackendError, match="never"):
        backend.create(key=KEY, spec=_spec(tenant=tenant))
    assert cli.calls == []  # nothing was submitted


@pytest.mark.parametrize("user", ["root", "", pwd.getpwuid(0).pw_name])
def test_rest_user_root_or_none_is_a_configuration_error(tmp_path, user):
    with pytest.raises(ImproperlyConfigured, match="REST_USER"):
        SlurmBackend(
            alias="slurm",
            options={"ROOT": str(tmp_path), "REST_URL": "http://127.0.0.1:1", "REST_USER": user, "JWT_TOKEN": "t"},
        )


def test_over_rest_each_tenant_gets_its_own_token_from_the_clusters_key(tmp_path):
    key_file = tmp_path / "jwt.key"
    key_file.write_bytes(b"k" * 32)
    rest = SlurmRest(url="http://127.0.0.1:1", user="nobody", jwt_key_file=str(key_file), token_lifespan=600)
    token = rest.token("gpuc-t9001")
    _header, payload, _signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    assert claims["sun"] == "gpuc-t9001" and claims["exp"] - claims["iat"] == 600
    assert token == jwt_mint(key=b"k" * 32, user="gpuc-t9001", lifespan=600, now=claims["iat"])
    assert rest.token("nobody") != token
    # A fixed token (or a command without {user}) cannot speak for tenants: said plainly.
    fixed = SlurmRest(url="http://127.0.0.1:1", user="nobody", token="t", token_command=["scontrol", "token"])
    with pytest.raises(PermanentBackendError, match="JWT_KEY_FILE"):
        fixed.token("gpuc-t9001")


def test_site_provisioned_users_are_only_named_and_a_missing_one_is_a_clear_error(tmp_path):
    accounts = TenantAccounts(mode="site", home_root=tmp_path)
    with pytest.raises(PermanentBackendError, match=r"does not exist.*LDAP/SSSD"):
        accounts.ensure(Tenant("gpuc-t-nobody-has-this", 79999, 1 << 30))
    taken = pwd.getpwuid(65534)  # nobody: exists, under another uid than the tenant's
    with pytest.raises(PermanentBackendError, match="exists with uid 65534"):
        accounts.ensure(Tenant(taken.pw_name, 79998, 1 << 30))
    with pytest.raises(ImproperlyConfigured, match="TENANT_USERS"):
        TenantAccounts(mode="ldap", home_root=tmp_path)
