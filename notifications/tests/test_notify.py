"""``notify``: an inbox line in the recipient's language, the e-mail and webhooks their preferences ask
for, sent on commit; the recipients hook expands an account into several people."""

from __future__ import annotations

from django.core import mail
from django.utils import translation
from django.utils.translation import gettext as _

from budgets.services import budget_set
from budgets.tasks import budgets_check_task
from budgets.tests.test_budgets import spend
from notifications.hooks import recipients
from notifications.models import Kind, Notification, NotificationPreference, WebhookDelivery
from notifications.services import Message, notify, preferences_set, webhook_endpoint_create


def _budget_message() -> Message:
    return Message(title=_("You have spent %(pct)d%% of your monthly budget") % {"pct": 50}, body="…")


def test_a_worker_task_mails_a_chinese_user_in_chinese(rich_alice, django_capture_on_commit_callbacks):
    rich_alice.language = "zh-hans"
    rich_alice.save(update_fields=["language"])
    budget_set(user=rich_alice, monthly_limit_fen=10_000)
    spend(rich_alice, 5_000)
    translation.activate("en")  # the worker's own language
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check_task.apply().get() == {"alerts": 1, "stopped": 0}
    row = Notification.objects.get(user=rich_alice)
    assert row.kind == Kind.BUDGET_THRESHOLD and row.title == "您已花费月度预算的 50%"
    assert row.link == "/billing/budget/"
    assert [m.subject for m in mail.outbox] == ["您已花费月度预算的 50%"]
    assert "¥50.00" in mail.outbox[0].body and mail.outbox[0].to == [rich_alice.email]
    assert translation.get_language() == "en"  # the worker's language is left as it was


def test_an_english_user_gets_english(alice, django_capture_on_commit_callbacks):
    translation.activate("zh-hans")  # say, a staff member's request in Chinese decides for alice
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.BUDGET_THRESHOLD, render=_budget_message)
    assert mail.outbox[0].subject == "You have spent 50% of your monthly budget"


def test_mail_goes_only_once_the_transaction_commits(alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notify(user=alice, kind=Kind.LOW_BALANCE, render=_budget_message)
        assert Notification.objects.filter(user=alice).count() == 1  # the inbox line is in the transaction
    assert mail.outbox == [] and callbacks


def test_preferences_are_respected(alice, receiver, django_capture_on_commit_callbacks):
    webhook_endpoint_create(user=alice, url=receiver.url)
    preferences_set(user=alice, choices={Kind.LOW_BALANCE: {"email": False, "webhook": False}})
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.LOW_BALANCE, render=_budget_message)
    assert Notification.objects.filter(user=alice, kind=Kind.LOW_BALANCE).count() == 1  # the inbox always
    assert mail.outbox == [] and WebhookDelivery.objects.count() == 0
    # Defaults elsewhere: the idle stop is inbox and webhook only; deployment failures mail.
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.IDLE_STOPPED, render=_budget_message)
    assert mail.outbox == [] and WebhookDelivery.objects.filter(kind=Kind.IDLE_STOPPED).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.DEPLOYMENT_FAILED, render=_budget_message)
    assert len(mail.outbox) == 1
    # Back to the default: no row is kept.
    preferences_set(user=alice, choices={Kind.LOW_BALANCE: {"email": True, "webhook": True}})
    assert not NotificationPreference.objects.filter(user=alice).exists()


def team_of_alice_and_bob(*, user, kind, actor=None):
    from accounts.models import User

    return User.objects.filter(email__in=["alice@example.com", "bob@example.com"])


def test_the_recipients_hook_expands_an_account(alice, bob, hooks_override, django_capture_on_commit_callbacks):
    hooks_override(recipients, team_of_alice_and_bob)
    bob.language = "zh-hans"
    bob.save(update_fields=["language"])
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.BUDGET_THRESHOLD, render=_budget_message)
    titles = dict(Notification.objects.values_list("user__email", "title"))
    assert titles == {
        "alice@example.com": "You have spent 50% of your monthly budget",
        "bob@example.com": "您已花费月度预算的 50%",
    }
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.com", "bob@example.com"]


def test_old_lines_and_finished_deliveries_are_pruned(alice, receiver, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from notifications.models import WebhookAttempt
    from notifications.tasks import notifications_prune_task

    webhook_endpoint_create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        notify(user=alice, kind=Kind.LOW_BALANCE, render=_budget_message)
    Notification.objects.update(created_at=timezone.now() - timedelta(days=181))
    WebhookDelivery.objects.update(created_at=timezone.now() - timedelta(days=31))
    fresh = notify(user=alice, kind=Kind.IDLE_WARNING, render=_budget_message)[0]  # its delivery still pending
    WebhookDelivery.objects.filter(notification=fresh).update(created_at=timezone.now() - timedelta(days=31))
    assert notifications_prune_task.apply().get() == {"notifications": 1, "deliveries": 1}
    assert list(Notification.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert WebhookDelivery.objects.get().notification_id == fresh.pk  # pending: kept until its last attempt
    assert not WebhookAttempt.objects.exists()
