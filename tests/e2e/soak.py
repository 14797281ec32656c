"""Ten API clients launching, stopping, starting and releasing for a few minutes (the soak)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx

STABLE = {"running", "stopped", "released", "failed", "lost"}
TRANSITIONAL = {"requested", "scheduling", "provisioning", "restarting", "stopping", "starting", "releasing"}

# Ten funded users with API tokens, made in the console under test by its own services (as staff
# would grant credit): printed one token per line.
SEED_USERS = """
from allauth.account.models import EmailAddress
from accounts.models import User
from accounts.services import api_token_create
from billing.services import balance_adjust, trial_claim

staff = User.objects.get(email="admin@example.com")
for n in range({n}):
    user = User.objects.create_user(email=f"soak-{{n}}-{tag}@example.com", password=None)
    EmailAddress.objects.create(user=user, email=user.email, verified=True, primary=True)
    trial_claim(user=user)
    balance_adjust(user=user, amount_fen=200_000, reason="soak test", staff_user=staff)
    print("TOKEN", api_token_create(user=user, name="soak", expires_at=None)[1])
"""


@dataclass
class SoakResult:
    operations: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    # Under faults (tolerate_faults): calls that found no server (the web process killed) and 503s that
    # said when to come back (a dependency down), both retried; a 503 without Retry-After is an error.
    unreachable: int = 0
    unavailable: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def soak(
    base_url: str, tokens: list[str], seconds: float, settle_timeout: float = 120, *, tolerate_faults: bool = False
) -> SoakResult:
    """Each token's client launches, waits for running, stops, starts and releases, over and over, until
    ``seconds`` have passed (then it finishes its round). ``tolerate_faults``: the chaos soak kills the
    console's processes meanwhile, so a refused connection or a 503 with ``Retry-After`` is retried
    (and counted); a 500, or a 503 without ``Retry-After``, is an error either way."""
    result = SoakResult()
    deadline = time.monotonic() + seconds

    def client(token: str, n: int) -> None:
        rng = random.Random(n)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=30) as http:
            catalogue = http.get("/api/v1/catalogue/").json()
            choices = _launch_choices(catalogue)

            def call(method: str, url: str, **kwargs) -> httpx.Response | None:
                try:
                    response = http.request(method, url, **kwargs)
                except httpx.TransportError:
                    if not tolerate_faults:
                        raise
                    with result.lock:
                        result.unreachable += 1
                    time.sleep(1)
                    return None
                if tolerate_faults and response.status_code == 503 and response.headers.get("Retry-After"):
                    with result.lock:
                        result.unavailable += 1
                    time.sleep(1)
                    return None
                if response.status_code >= 500:
                    with result.lock:
                        result.server_errors.append(f"{method} {url}: {response.status_code} {response.text[:200]}")
                    return None
                return response

            def act(url: str, **kwargs) -> httpx.Response | None:
                """A POST, sent again (with the same Idempotency-Key) while no server answers it."""
                kwargs.setdefault("headers", {})["Idempotency-Key"] = str(uuid.uuid4())
                give_up = time.monotonic() + settle_timeout
                while True:
                    response = call("POST", url, **kwargs)
                    if response is not None or not tolerate_faults or time.monotonic() > give_up:
                        return response

            def wait_for(pk: str, wanted: set[str]) -> str:
                end = time.monotonic() + settle_timeout
                status = ""
                while time.monotonic() < end:
                    response = call("GET", f"/api/v1/instances/{pk}/")
                    if response is not None and response.status_code == 200:
                        status = response.json()["status"]
                        if status in wanted or status in {"failed", "lost"}:
                            return status
                    time.sleep(0.5)
                return status

            while time.monotonic() < deadline:
                region, gpu = rng.choice(choices)
                response = act(
                    "/api/v1/instances/",
                    json={
                        "region": region,
                        "gpu_model": gpu,
                        "gpu_count": 1,
                        "image": "pytorch-2.5-cu124",
                        "disk_gb": 50,
                        "name": f"soak-{n}",
                    },
                )
                if response is None:
                    continue
                if response.status_code != 201:
                    with result.lock:
                        result.refused[f"launch {response.status_code}"] += 1
                    time.sleep(1)
                    continue
                pk = response.json()["id"]
                with result.lock:
                    result.instances.append(pk)
                    result.operations["launch"] += 1
                if wait_for(pk, {"running"}) == "running":
                    for verb, target in (("stop", "stopped"), ("start", "running")):
                        acted = act(f"/api/v1/instances/{pk}/{verb}/")
                        if acted is None or acted.status_code >= 400:
                            with result.lock:
                                result.refused[f"{verb} {getattr(acted, 'status_code', 500)}"] += 1
                            break
                        with result.lock:
                            result.operations[verb] += 1
                        if wait_for(pk, {target}) != target:
                            break
                released = act(f"/api/v1/instances/{pk}/release/")
                if released is not None and released.status_code < 400:
                    with result.lock:
                        result.operations["release"] += 1
                    wait_for(pk, {"released"})

    threads = [threading.Thread(target=client, args=(token, n)) for n, token in enumerate(tokens)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result


def _launch_choices(catalogue: dict) -> list[tuple[str, str]]:
    """(region, GPU model) pairs with free cards, from the catalogue endpoint."""
    pairs = [
        (region, gpu["slug"])
        for gpu in catalogue["gpu_models"]
        for region, room in gpu.get("free_cards_by_region", {}).items()
        if room.get("largest_on_one_node", 0) >= 1
    ]
    assert pairs, f"the catalogue offers nothing to launch: {catalogue}"
    return pairs
