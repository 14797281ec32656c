"""Issue #15's browser proof, end to end in Chromium at 1366 px: alice creates a team, moves money into its
wallet and invites bob by e-mail; bob opens the link from the e-mail, accepts, switches to the team in the
header and launches an instance on the simulated cloud; alice, acting in the team, finds bob's line and his
instance on the team's statement for this month (and it fits a phone's 390 px)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from playwright.sync_api import Page, expect

from billing.settlement import meters_settle_all
from instances.catalogue import catalogue_seed
from instances.models import Instance
from instances.services import instance_sync
from instances.tests.conftest import fund

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEAM = "Vision Lab"


def _switch_to(page: Page, name: str) -> None:
    switcher = page.locator("details.context-menu")
    switcher.locator("summary").click()
    switcher.get_by_role("button", name=name).click()
    expect(page.locator("details.context-menu summary")).to_have_text(name)


def test_an_owner_invites_the_member_launches_in_the_team_and_the_owner_sees_it_on_the_statement(
    live_server, page: Page, browser, alice, bob, sign_in, screenshot_dir
):
    catalogue_seed()  # the simulated cloud's demo fleet (boots at once under test)
    fund(alice, 100_000)  # ¥1,000 of paid money, as a payment would
    page.set_default_timeout(15_000)
    page.set_viewport_size({"width": 1366, "height": 900})
    sign_in(page, alice)

    # alice creates the team in the UI and lands on its page.
    page.goto(live_server.url + "/teams/")
    page.locator("#create-team input[name=name]").fill(TEAM)
    page.locator("#create-team").get_by_role("button", name="Create team").click()
    expect(page).to_have_url(re.compile(r"/teams/[\w-]+/$"))
    expect(page.locator("h1")).to_contain_text(TEAM)
    team_url = page.url

    # She moves ¥200 from her wallet into the team's.
    page.get_by_role("link", name="Wallet").first.click()
    page.locator("#move-money select[name=direction]").select_option(label="Into the team, from my wallet")
    page.locator("#move-money input[name=amount]").fill("200")
    page.locator("#move-money").get_by_role("button", name="Move").click()
    expect(page.get_by_text("¥200.00 moved into the team.")).to_be_visible()
    expect(page.locator("#team-balance .stat").first.locator(".value")).to_have_text("¥200.00")

    # She invites bob by e-mail as a member; the link comes from the e-mail (the live server is in-process).
    page.goto(team_url)
    invite = page.locator("form[action$='/invite/']")
    invite.locator("input[name=email]").fill(bob.email)
    invite.locator("select[name=role]").select_option("member")
    invite.get_by_role("button", name="Send invitation").click()
    expect(page.get_by_text(f"Invitation sent to {bob.email}.")).to_be_visible()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [bob.email]
    link = re.search(r"https?://\S+/teams/invitations/\S+/", mail.outbox[0].body).group(0)
    path = re.sub(r"^https?://[^/]+", "", link)

    # bob, signed in with that (verified) address, accepts and acts in the team.
    bob_page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    bob_page.set_default_timeout(15_000)
    sign_in(bob_page, bob)
    bob_page.goto(live_server.url + path)
    expect(bob_page.locator("#invitation h1")).to_have_text(f"Join {TEAM}")
    bob_page.get_by_role("button", name="Accept and join").click()
    # Accepting puts him in the team's context; the header switches him out and back in one click each.
    expect(bob_page.locator("details.context-menu summary")).to_have_text(TEAM)
    bob_page.goto(live_server.url + "/instances/")
    _switch_to(bob_page, "Personal")
    _switch_to(bob_page, TEAM)

    # He launches in the team: the team's account owns the instance, bob created it.
    bob_page.goto(live_server.url + "/instances/launch/")
    expect(bob_page.locator("#launch-button")).to_be_enabled()
    bob_page.locator("#launch-form input[name=name]").fill("bobs-run")
    bob_page.locator("#launch-button").click()
    expect(bob_page).to_have_url(re.compile(r"/instances/[0-9a-f-]{36}/$"))
    instance = Instance.objects.get(name="bobs-run")
    assert instance.created_by_id == bob.pk and instance.owner_id != bob.pk
    if instance.status == "provisioning":  # the worker's poll, played by the test
        instance_sync(instance_id=instance.pk)
    bob_page.reload()
    expect(bob_page.locator("#instance-body h1 .badge")).to_have_text("Running")
    bob_page.context.close()

    # An hour of use is settled (the settlement task's work), then alice reads the team's statement.
    meters_settle_all(now=timezone.now() + timedelta(hours=1))
    page.goto(team_url)
    _switch_to(page, TEAM)
    # The dashboard, in the team's context, shows the team's money and bob's instance.
    page.goto(live_server.url + "/dashboard/")
    expect(page.locator("#team-instances tbody tr", has_text="bobs-run")).to_contain_text("Bob")
    expect(page.locator("#money")).to_contain_text("¥198.68")
    month = f"{timezone.localdate():%Y-%m}"
    page.goto(f"{live_server.url}/billing/statements/{month}/")
    by_member = page.locator("#usage-by-member")
    expect(by_member.locator("tbody tr", has_text="Bob")).to_be_visible()
    expect(by_member.locator("tbody tr", has_text="Bob").locator("td").last).not_to_have_text("¥0.00")
    by_instance = page.locator("#usage-by-instance")
    row = by_instance.locator("tbody tr", has_text="bobs-run")
    expect(row).to_be_visible()
    expect(row).to_contain_text("Bob")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366
    page.screenshot(path=str(screenshot_dir / "team-statement-1366.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#usage-by-member")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(screenshot_dir / "team-statement-390.png"), full_page=True)
