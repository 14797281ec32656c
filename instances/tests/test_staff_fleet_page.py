"""The staff fleet page: regions, their backends and nodes, health, totals, instances per node, sync now."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from instances.models import Instance, Node
from instances.services import nodes_sync
from instances.tests.conftest import committed, running, simulate
from providers import get_backend

S = Instance.Status
URL = "/staff/fleet/"


def test_strangers_and_anonymous_visitors_get_a_404(client, alice_client, catalogue):
    assert client.get(URL).status_code == 404
    assert alice_client.get(URL).status_code == 404
    assert alice_client.post(URL + "cn-north-1/sync/").status_code == 404
    assert client.post(URL + "cn-north-1/sync/").status_code == 404
    assert not Node.objects.exists()  # nothing was synced for them


def test_the_staff_navigation_links_to_it(client_for, staff, alice_client, catalogue):
    assert 'href="/staff/fleet/"' in client_for(staff).get("/dashboard/").content.decode()
    assert 'href="/staff/fleet/"' not in alice_client.get("/dashboard/").content.decode()


def test_staff_see_regions_backends_nodes_totals_and_instances_per_node(rich_alice, client_for, staff):
    instance = running(rich_alice, count=2)
    page = client_for(staff).get(URL)
    body = page.content.decode()
    assert page.status_code == 200
    assert "North China 1 (Beijing)" in body and "East China 1 (Shanghai)" in body
    assert "<code>default</code>" in body and "<code>providers.simulated.backend.SimulatedBackend</code>" in body
    # Per region: 3 nodes, 24 cards of which 2 in use; the fleet has 4 nodes and 32 cards.
    assert "3 nodes · 24 cards: 2 in use, 22 free, 0 free but out of service · 1 instances" in body
    assert '<div class="label">Cards free / total</div><div class="value">30 / 32</div>' in body
    row = body[body.index(f'data-node="{instance.node.name}"') :]
    row = row[: row.index("</tr>")]
    assert "Healthy" in row and f"?node__id__exact={instance.node_id}" in row
    assert "A800 80GB" in body and "H800 80GB" in body  # the per-model table


def test_the_admin_link_lists_the_nodes_instances(rich_alice, client_for, staff):
    instance = running(rich_alice)
    running(rich_alice, gpu="h800")
    page = client_for(staff).get(f"/admin/instances/instance/?node__id__exact={instance.node_id}")
    assert page.status_code == 200
    assert "1 instance" in page.content.decode()


def test_an_unhealthy_node_is_highlighted_with_why(rich_alice, client_for, staff):
    instance = running(rich_alice)
    get_backend("default").node_drain(name=instance.node.name)
    nodes_sync(alias="default")
    body = client_for(staff).get(URL).content.decode()
    row = body[body.rindex("<tr", 0, body.index(f'data-node="{instance.node.name}"')) :]
    row = row[: row.index("</tr>")]
    assert 'class="node-unhealthy"' in row and "Out of service" in row and "draining" in row
    assert "1 node out of service" in body


def test_sync_now_reads_the_backend_and_reports(rich_alice, client_for, staff):
    client = client_for(staff)
    assert client.get(URL + "cn-north-1/sync/").status_code == 405
    response = client.post(URL + "cn-north-1/sync/", follow=True)
    assert response.redirect_chain == [(reverse("staff_fleet"), 302)]
    assert "North China 1 (Beijing) synced: 3 nodes, 0 out of service, 0 instances checked." in (
        response.content.decode()
    )
    assert Node.objects.filter(region__slug="cn-north-1").count() == 3


def test_sync_now_marks_the_instances_a_lost_node_took(rich_alice, client_for, staff):
    instance = running(rich_alice)
    get_backend("default").node_lose(name=instance.node.name)
    with committed():
        client_for(staff).post(URL + "cn-north-1/sync/")
    instance.refresh_from_db()
    assert instance.status == S.LOST


def test_sync_now_of_an_unreachable_backend_says_so_not_a_500(client_for, staff, catalogue):
    with simulate(UNREACHABLE=True):
        response = client_for(staff).post(URL + "cn-north-1/sync/", follow=True)
    assert response.status_code == 200
    assert "did not answer" in response.content.decode()


def test_sync_now_of_an_unknown_region_is_a_404(client_for, staff, catalogue):
    assert client_for(staff).post(URL + "nowhere/sync/").status_code == 404


def test_a_region_without_a_configured_backend_says_so(client_for, staff, catalogue):
    from instances.models import Region

    Region.objects.create(slug="cn-west-1", name="West China 1", backend_alias="nowhere")
    body = client_for(staff).get(URL).content.decode()
    west = body[body.index('id="region-cn-west-1"') :]
    assert "not configured" in west[:2000]
    assert client_for(staff).post(URL + "cn-west-1/sync/", follow=True).status_code == 200


def test_htmx_gets_the_body_partial(client_for, staff, catalogue):
    body = client_for(staff).get(URL, headers={"HX-Request": "true"}).content.decode()
    assert body.lstrip().startswith('<div id="fleet"')
    assert "<html" not in body


def test_an_empty_fleet_says_what_to_do(client_for, staff, db):
    body = client_for(staff).get(URL).content.decode()
    assert "No regions" in body


def test_the_query_count_does_not_grow_with_the_fleet(rich_alice, client_for, staff, settings):
    client = client_for(staff)
    nodes_sync(alias="default")
    running(rich_alice)

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(URL).status_code == 200
        return len(ctx.captured_queries)

    few = queries()
    with simulate(FLEET=[{"region": "cn-north-1", "gpu": "l40s", "nodes": 30, "cards": 8}]):
        from providers.simulated.models import SimulatedNode

        SimulatedNode.objects.all().delete()
        nodes_sync(alias="default")
    running(rich_alice, gpu="l40s")
    assert Node.objects.count() > 30
    assert queries() == few
