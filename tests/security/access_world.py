"""The people, credentials and objects the table of who may do what (``test_who_may_do_what.py``) is
checked against, built once per module.

Three contexts, each holding one of every kind of object: alice's personal account; team A ("Lab"),
which alice owns and where ada is an admin, mel a member and bill a billing viewer, its objects made by
alice (so for mel they are a colleague's); team B ("Rival"), charlie's, in which none of them is. Gus is a
member of team A whose membership the team routes change. Fred
was a member of team A and was removed, after he made a token scoped to it and while his session still
acts in it. Person-owned objects (SSH keys, API tokens, webhooks, notifications) are alice's in the
personal context and charlie's in team B's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import asyncssh
from django.test import Client
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create, ssh_key_add
from accounts.tests.factories import UserFactory
from apps_marketplace.models import App, ModelEntry
from apps_marketplace.services import deployment_create
from billing.payments import topup_order_create
from instances.capacity.reservations import reservation_create
from instances.models import GpuModel, Region
from instances.quota import quota_request_create
from instances.services import image_save, snapshot_create
from instances.tests.conftest import committed, fund, launch
from notifications.models import Kind
from notifications.services import Message, notify, webhook_endpoint_create
from ports.services import port_declare, share_create
from storage.services import volume_attach, volume_create
from teams.context import SESSION_KEY
from teams.models import Invitation, Membership, Role, Team
from teams.services import invitation_create, membership_remove, team_create
from vault.services import registry_credential_set, secret_set

# A word in every object of team B's and charlie's: no answer to anyone else may contain it.
STRANGER_MARK = "zzrival"


@dataclass
class Context:
    """One account's objects, by kind; ``None`` where the context has none of that kind."""

    name: str
    account: object
    objects: dict[str, object] = field(default_factory=dict)


@dataclass
class World:
    people: dict[str, object]
    teams: dict[str, Team]
    contexts: dict[str, Context]
    clients: dict[str, tuple[Client, dict]]  # principal -> its client and the headers it sends
    keys: dict[str, str]  # person -> the fingerprint of their SSH key


def _public_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()


def _client(user, team: Team | None = None) -> Client:
    client = Client()
    client.force_login(user)
    if team is not None:
        session = client.session
        session[SESSION_KEY] = team.pk
        session.save()
    return client


def _fill(context: Context, *, person, actor, staff, mark: str) -> None:
    """One of each kind of object in ``context``: the account's resources made by ``actor``, the person
    ``person``'s own credentials and settings."""
    account = context.account
    region = Region.objects.get(slug="cn-north-1")
    gpu = GpuModel.objects.get(slug="a800-80g")
    fund(account, 10_000_000)
    with committed():
        instance = launch(account, name=f"box-{mark}")
        instance.created_by = actor
        instance.save(update_fields=["created_by"])
        volume = volume_create(user=account, actor=actor, region=region, name=f"data-{mark}", size_gb=10)
        deployment, _key = deployment_create(
            user=account,
            actor=actor,
            app=App.objects.get(slug="llama-3-instruct-chat"),
            model=ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-8B-Instruct"),
            parameters={},
            gpu_model=gpu,
            gpu_count=1,
            region=region,
        )
    instance.refresh_from_db()
    volume.refresh_from_db()
    with committed():
        saved_image = image_save(instance=instance, actor=actor, name=f"env-{mark}")
    saved_image.refresh_from_db()
    with committed():
        snapshot = snapshot_create(instance=instance, actor=actor, label=f"snap-{mark}")
    snapshot.refresh_from_db()
    attachment = volume_attach(user=account, actor=actor, volume=volume, instance=instance, mount_path="/data")
    port = port_declare(instance=instance, port=8080, name=f"web-{mark}")
    share = share_create(port=port, label=f"link-{mark}", actor=actor)
    quota_request = quota_request_create(
        user=account, actor=actor, gpu_model=gpu, cards=64, duration_days=7, reason=f"training {mark}"
    )
    reservation = reservation_create(
        account=account,
        region=region,
        gpu_model=GpuModel.objects.get(slug="h800"),
        cards=1,
        ends_at=timezone.now() + dt.timedelta(days=2),
        staff=staff,
        note=mark,
    )
    order, _url = topup_order_create(user=account, amount_fen=10_000)
    # A name per context: the URL names a secret by name within the acting account.
    secret, _created = secret_set(owner=account, actor=actor, name=f"KEY_{mark.upper()}", value=f"value-{mark}")
    registry_credential, _created = registry_credential_set(
        owner=account, actor=actor, host=f"registry-{mark.lower()}.example.com", username=mark, password=f"pw-{mark}"
    )
    context.objects.update(
        registry_credential=registry_credential,
        instance=instance,
        volume=volume,
        saved_image=saved_image,
        snapshot=snapshot,
        attachment=attachment,
        deployment=deployment,
        port=port,
        share=share,
        quota_request=quota_request,
        reservation=reservation,
        order=order,
        secret=secret,
        month=timezone.now().strftime("%Y-%m"),
    )
    if person is not None:
        key = ssh_key_add(user=person, name=f"key-{mark}", public_key=_public_key())
        token, _raw = api_token_create(user=person, name=f"ci-{mark}", expires_at=None)
        notify(user=person, kind=Kind.LOW_BALANCE, render=lambda: Message(title=f"Hello {mark}"))
        webhook = webhook_endpoint_create(user=person, url=f"https://hooks.example.com/{mark}")
        context.objects.update(
            ssh_key=key,
            token=token,
            webhook=webhook,
            notification=person.notifications.order_by("-id").first(),
        )


def world_build() -> World:
    people = {
        name: UserFactory(email=f"{name}@example.com", display_name=name.title())
        for name in ("alice", "ada", "mel", "bill", "fred", "gus", "charlie")
    }
    staff = UserFactory(email="staff@example.com", is_staff=True, is_superuser=True)
    alice, charlie = people["alice"], people["charlie"]
    lab = team_create(user=alice, name="Lab")
    rival = team_create(user=charlie, name=f"Rival {STRANGER_MARK}")
    roles = (
        ("ada", Role.ADMIN),
        ("mel", Role.MEMBER),
        ("bill", Role.BILLING),
        ("fred", Role.MEMBER),
        ("gus", Role.MEMBER),
    )
    for name, role in roles:
        Membership.objects.create(team=lab, user=people[name], role=role)

    contexts = {
        "personal": Context("personal", alice),
        "team_a": Context("team_a", lab.account),
        "team_b": Context("team_b", rival.account),
    }
    _fill(contexts["personal"], person=alice, actor=alice, staff=staff, mark="mine")
    _fill(contexts["team_a"], person=None, actor=alice, staff=staff, mark="lab")
    _fill(contexts["team_b"], person=charlie, actor=charlie, staff=staff, mark=STRANGER_MARK)
    for context, team in (("team_a", lab), ("team_b", rival)):
        owner = alice if team is lab else charlie
        # The membership the team routes change: gus's in team A (nobody's own among the principals).
        target = people["gus"] if team is lab else charlie
        invitation, _raw = invitation_create(
            actor=owner, team=team, email=f"new-{team.slug}@example.com", role=Role.MEMBER, site_url="http://testserver"
        )
        contexts[context].objects.update(
            team=team,
            member=Membership.objects.get(team=team, user=target),
            invitation=invitation,
        )
    assert Invitation.objects.count() == 2

    keys = {}
    for name, person in people.items():
        key = ssh_key_add(user=person, name=f"{name}-laptop", public_key=_public_key())
        keys[name] = key.fingerprint
        # Every key chosen for every instance: the gateway's verdict then turns on who operates it alone.
        for context in contexts.values():
            context.objects["instance"].ssh_keys.add(key)

    _t, full = api_token_create(user=alice, name="laptop", expires_at=None)
    _t, read = api_token_create(user=alice, name="dashboard", expires_at=None, scope=APIToken.Scope.READ)
    _t, scoped = api_token_create(user=alice, name="lab-ci", expires_at=None, team_id=lab.pk)
    _t, fred_scoped = api_token_create(user=people["fred"], name="fred-ci", expires_at=None, team_id=lab.pk)
    anonymous = Client()  # one client for the tokens: each new client loads the middleware again

    def bearer(raw: str) -> tuple[Client, dict]:
        return anonymous, {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    clients = {
        "session": (_client(alice), {}),
        "token": bearer(full),
        "read_token": bearer(read),
        "team_token": bearer(scoped),
        "former": (_client(people["fred"], lab), {}),
        "former_token": bearer(fred_scoped),
        "owner": (_client(alice, lab), {}),
        "admin": (_client(people["ada"], lab), {}),
        "member": (_client(people["mel"], lab), {}),
        "billing": (_client(people["bill"], lab), {}),
    }
    membership_remove(actor=alice, membership=Membership.objects.get(team=lab, user=people["fred"]))
    return World(people=people, teams={"team_a": lab, "team_b": rival}, contexts=contexts, clients=clients, keys=keys)
